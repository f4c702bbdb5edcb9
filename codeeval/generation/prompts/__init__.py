"""Prompts and answers shared by every backend: rendering, chat, FIM, stopping, seeds, thinking."""
