"""What runs say to people, above the stages: a run's summary, two runs compared, and the
nightly leaderboard (its rows, history, paired comparisons and page)."""
