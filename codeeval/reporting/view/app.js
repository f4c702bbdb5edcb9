/* codeeval view: the page of a run's samples (or two runs' side by side), written by
   codeeval/reporting/view/site.py. Every model-written text reaches the DOM through text nodes
   (el() below), never as markup. The whole view state lives in the URL fragment
   (#task=..&verdict=..&problem=..&q=..&sample=..; codeeval/reporting/view/links.py spells it). */
"use strict";
(function () {
  const PAGE = 100; // table rows per page
  const D = { run: null, tasks: {}, waiting: {}, page: 0, timings: {} };

  window.codeevalView = {
    run(data) { D.run = data; },
    task(data) {
      D.tasks[data.name] = prepare(data);
      arrived(data.name);
    },
    texts(data) { // a block of a task's samples' texts (site.py write_texts)
      const t = D.tasks[data.task], [start, end] = t.blocks[data.block];
      data.runs.forEach((texts, side) => {
        const rows = t.runs[side];
        let i = t.rowStart[side][start], k = 0;
        for (; i < rows.length && rows[i][C.p] < end; i++, k++) {
          const x = texts[k] || [];
          t.text[side][i] = x;
          t.hay[side][i] = ((x[X.completion] || (x[X.raw] || "").slice(0, rows[i][C.cut] || 0)) + "\n" + (x[X.stderr] || "") +
            "\n" + (rows[i][C.predicted] || "")).toLowerCase();
        }
      });
      t.loaded.add(data.block);
      arrived(data.task + "#" + data.block);
    },
    timings: D.timings,
  };

  // ---- DOM helpers: text only ----
  const CONTROL = /[\u0000-\u0008\u000b-\u001f\u007f]/g;
  function visible(s) { // control characters (ANSI escapes among them) as their visible pictures
    return String(s).replace(CONTROL, (c) => String.fromCharCode(c === "\u007f" ? 0x2421 : 0x2400 + c.charCodeAt(0)));
  }
  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
      else if (k === "class") node.className = v;
      else if (k === "value") node.value = v;
      else node.setAttribute(k, String(v));
    }
    return put(node, children);
  }
  function put(parent, ...children) { // nodes and texts (nested lists too); null, undefined and false are nothing
    for (const c of children.flat(Infinity)) {
      if (c === null || c === undefined || c === false) continue;
      parent.append(c instanceof Node ? c : document.createTextNode(visible(c)));
    }
    return parent;
  }
  function clear(node) { while (node.firstChild) node.removeChild(node.firstChild); return node; }

  // ---- state in the fragment ----
  function state() {
    const s = {};
    for (const part of location.hash.replace(/^#/, "").split("&")) {
      const i = part.indexOf("=");
      if (i > 0) s[decodeURIComponent(part.slice(0, i))] = decodeURIComponent(part.slice(i + 1));
    }
    return s;
  }
  function fragment(s) {
    const parts = D.run.keys.filter((k) => s[k] !== undefined && s[k] !== null && s[k] !== "") // links.py KEYS
      .map((k) => k + "=" + encodeURIComponent(s[k]));
    return "#" + parts.join("&");
  }
  function link(s, ...children) { return el("a", { href: fragment(s) }, ...children); }

  // ---- data ----
  let C = null, X = null; // column -> position, in a sample's index row and in its texts
  function key(r) { return r[C.p] * 1048576 + r[C.s]; }
  function prepare(data) {
    C = C || Object.fromEntries(D.run.columns.map((c, i) => [c, i]));
    X = X || Object.fromEntries(D.run.texts.map((c, i) => [c, i]));
    data.byProblem = {};
    data.problems.forEach((p, i) => { data.byProblem[p.id] = i; });
    data.position = data.runs.map((rows) => new Map(rows.map((r, i) => [key(r), i]))); // (problem, sample) -> row
    data.rowStart = data.runs.map((rows) => { // problem -> its first row
      const start = new Array(data.problems.length + 1).fill(rows.length);
      for (let i = rows.length - 1; i >= 0; i--) start[rows[i][C.p]] = i;
      for (let p = data.problems.length - 1; p >= 0; p--) start[p] = Math.min(start[p], start[p + 1]);
      return start;
    });
    data.text = data.runs.map((rows) => new Array(rows.length));
    data.hay = data.runs.map((rows) => new Array(rows.length));
    data.promptHay = data.problems.map((p) => (p.prompt || "").toLowerCase());
    data.loaded = new Set();
    return data;
  }
  function arrived(name) {
    (D.waiting[name] || []).forEach((f) => f());
    delete D.waiting[name];
  }
  function script(name, src, ready) { // load a data file once; resolves when its call has run
    if (ready()) return Promise.resolve();
    return new Promise((resolve, reject) => {
      (D.waiting[name] = D.waiting[name] || []).push(resolve);
      if (D.waiting[name].length > 1) return;
      const s = el("script", { src: "data/" + src });
      s.onerror = () => reject(new Error("could not load data/" + src + ": keep the data folder beside index.html"));
      document.head.append(s);
    });
  }
  function load(name) {
    const task = D.run.tasks.find((t) => t.name === name);
    if (!task) return Promise.reject(new Error("this view has no task " + name));
    return script(name, task.chunk, () => D.tasks[name]).then(() => D.tasks[name]);
  }
  function loadBlock(t, b) { return script(t.name + "#" + b, t.blocks[b][2], () => t.loaded.has(b)); }
  function loadTextsOf(t, p) { return loadBlock(t, t.blocks.findIndex(([start, end]) => start <= p && p < end)); }
  function loadAllTexts(t) { // after the first render, one block at a time: the search then reads every text
    if (t.allLoading) return;
    t.allLoading = true;
    let b = 0;
    const next = () => {
      while (b < t.blocks.length && t.loaded.has(b)) b++;
      if (b >= t.blocks.length) { D.timings.texts = performance.now(); searchAgain(t); return; }
      loadBlock(t, b).then(() => { searchAgain(t); setTimeout(next, 0); });
    };
    setTimeout(next, 0);
  }
  function searchAgain(t) { // texts arrived while a search is shown: its rows again
    const s = state();
    if (s.task === t.name && s.q && !s.sample && document.getElementById("samples")) table(t, s);
  }
  function texts(t, side, r) { return t.text[side][t.position[side].get(key(r))] || []; }
  function completion(t, side, r) { // the program as executed
    const x = texts(t, side, r);
    if (x[X.completion] != null) return x[X.completion];
    return r[C.cut] != null ? t.problems[r[C.p]].prompt + (x[X.raw] || "").slice(0, r[C.cut]) : "";
  }
  function paired() { return D.run.runs.length > 1; }
  function rowOf(t, side, k) { const i = t.position[side].get(k); return i === undefined ? null : t.runs[side][i]; }
  function pairOf(t, r) { return paired() ? rowOf(t, 1, key(r)) : null; }
  function flip(t, r) {
    const b = pairOf(t, r);
    if (!b || typeof r[C.passed] !== "boolean" || typeof b[C.passed] !== "boolean" || r[C.passed] === b[C.passed]) return "";
    return r[C.passed] ? "pass-fail" : "fail-pass";
  }
  function verdictClass(status) {
    return { passed: "v-passed", correct: "v-correct", failed: "v-failed", wrong: "v-wrong", timeout: "v-timeout" }[status] || "v-other";
  }
  function fmt(x, digits) { return x === null || x === undefined ? "" : typeof x === "number" ? x.toFixed(digits === undefined ? 4 : digits) : String(x); }

  // ---- filters and search (the texts' lowercase copies are made as their blocks arrive) ----
  function filtered(t, s) {
    const rows = t.runs[0], out = [];
    const problem = s.problem !== undefined && s.problem !== "" ? t.byProblem[s.problem] : undefined;
    const q = (s.q || "").toLowerCase();
    const v = s.verdict || "";
    for (let i = 0; i < rows.length; i++) {
      const r = rows[i];
      if (problem !== undefined && r[C.p] !== problem) continue;
      if (v) {
        const b = pairOf(t, r);
        if (v === "flipped" || v === "pass-fail" || v === "fail-pass") {
          const f = flip(t, r);
          if (!f || (v !== "flipped" && f !== v)) continue;
        } else if (v === "passed" || v === "failed") {
          const want = v === "passed";
          if (r[C.passed] !== want && !(b && b[C.passed] === want)) continue;
        } else if (r[C.status] !== v && !(b && b[C.status] === v)) continue;
      }
      if (q && !t.promptHay[r[C.p]].includes(q) && !(t.hay[0][i] || "").includes(q)) {
        const j = paired() ? t.position[1].get(key(r)) : undefined;
        if (j === undefined || !(t.hay[1][j] || "").includes(q)) continue;
      }
      out.push(r);
    }
    return out;
  }

  // ---- pages ----
  function header(s) {
    const top = clear(document.getElementById("top"));
    const runs = D.run.runs.map((r, i) => (paired() ? "ABCD"[i] + ": " : "") + (r.model || "?") + " (run " + r.run_id + ")");
    put(top, el("h1", {}, "codeeval view: " + runs.join("  vs  ")),
      el("nav", {}, link({}, "all tasks"), D.run.tasks.map((t) => link({ task: t.name }, t.name))),
      el("div", { class: "runs" }, D.run.runs.map((r) => r.dir).join("  |  ")));
    document.title = "codeeval view: " + (s.task || runs.join(" vs "));
  }
  function interval(ci) { return ci ? "[" + fmt(ci[0]) + ", " + fmt(ci[1]) + "]" : ""; }
  function statuses(counts, task) {
    return Object.entries(counts || {}).map(([k, n]) => [link({ task, verdict: k }, k + " " + n), " "]);
  }
  function runPage(main) {
    const head = ["task", "kind"];
    D.run.runs.forEach((r, i) => head.push((paired() ? "ABCD"[i] + ": " : "") + "headline", "95% interval", "problems", "samples", "verdicts"));
    if (paired()) head.push("B - A", "95% interval of B - A", "p", "flips (pass->fail / fail->pass)");
    const body = D.run.tasks.map((t) => {
      const cells = [el("td", {}, link({ task: t.name }, t.name)), el("td", {}, t.kind || t.runs[0].kind)];
      t.runs.forEach((m) => {
        const key = m.primary, value = m.metrics ? m.metrics[key] : null;
        cells.push(el("td", { class: "num" }, key ? key + " " + fmt(value) : "not scored"),
          el("td", { class: "num" }, interval(m.ci95 && m.ci95[key])), el("td", { class: "num" }, fmt(m.problems, 0)),
          el("td", { class: "num" }, fmt(m.rows, 0)), el("td", {}, statuses(m.statuses, t.name)));
      });
      if (paired()) cells.push(...compareCells(t.name));
      return el("tr", {}, cells);
    });
    put(main, el("h2", {}, "Tasks"), el("table", {}, el("tr", {}, head.map((h) => el("th", {}, h))), body));
  }
  function compareCells(task) {
    const c = D.run.compare[task];
    if (!c || c.error) return [el("td", { colspan: 4, class: "error" }, c ? c.error : "not compared")];
    return [el("td", { class: "num" }, (c.b - c.a >= 0 ? "+" : "") + fmt(c.b - c.a)),
      el("td", { class: "num" }, interval(c.ci95)), el("td", { class: "num" }, c.p_value.toPrecision(4)),
      el("td", {}, link({ task, verdict: "pass-fail" }, String(c.pass_to_fail.length)), " / ",
        link({ task, verdict: "fail-pass" }, String(c.fail_to_pass.length)))];
  }
  function pairedTest(task) {
    const c = D.run.compare[task];
    if (!paired() || !c) return null;
    if (c.error) return el("div", { class: "box error" }, "not compared: " + c.error);
    return el("div", { class: "box" }, el("b", {}, "Paired test (codeeval compare): "),
      c.metric + " A " + fmt(c.a) + ", B " + fmt(c.b) + ", B - A " + fmt(c.b - c.a) + ", 95% interval " + interval(c.ci95) +
      ", p = " + c.p_value.toPrecision(4) + " (" + c.test + ", " + c.problems + " problems scored by both). ",
      c.flips ? "A problem passes when " + c.flips + ": " : "",
      c.flips ? [link({ task, verdict: "pass-fail" }, c.pass_to_fail.length + " pass -> fail"), ", ",
        link({ task, verdict: "fail-pass" }, c.fail_to_pass.length + " fail -> pass")] : "no pass/fail per problem");
  }
  function metricsBox(meta) {
    return el("div", { class: "sides" }, meta.runs.map((m, i) => el("div", { class: "box" },
      el("b", {}, (paired() ? "ABCD"[i] + ": " : "") + "metrics"),
      el("table", {}, el("tr", {}, ["metric", "value", "95% interval", "standard error"].map((h) => el("th", {}, h))),
        Object.entries(m.metrics || {}).map(([k, v]) => el("tr", {}, el("td", {}, k + (k === m.primary ? " (headline)" : "")),
          el("td", { class: "num" }, typeof v === "number" ? fmt(v) : JSON.stringify(v)),
          el("td", { class: "num" }, interval(m.ci95 && m.ci95[k])),
          el("td", {}, m.stderr && m.stderr[k] !== undefined ? fmt(m.stderr[k]) + " (" + ((m.stderr_method || {})[k] || "") + ")" : "")))),
      el("div", {}, "samples: " + m.rows + (m.passed !== null && m.passed !== undefined ? ", passed " + m.passed : "") + "; verdicts: ",
        statuses(m.statuses, meta.name)))));
  }
  function problemChips(t, s) {
    const counts = t.problems.map(() => t.runs.map(() => [0, 0]));
    t.runs.forEach((rows, i) => rows.forEach((r) => {
      const c = counts[r[C.p]][i];
      c[1]++;
      if (r[C.passed] === true) c[0]++;
    }));
    const cmp = D.run.compare[t.name] || {}, flipped = new Set([...(cmp.pass_to_fail || []), ...(cmp.fail_to_pass || [])]);
    const judged = t.kind !== "text";
    return el("details", { open: t.problems.length <= 400 ? "" : null },
      el("summary", {}, judged ? "Passes per problem (" + t.problems.length + " problems)" : t.problems.length + " problems"),
      el("div", { class: "chips" }, t.problems.map((p, i) => {
        const [k, n] = counts[i][0];
        const cls = !judged ? "" : n && k === n ? "all" : k ? "some" : "none";
        const label = judged ? p.id + " " + counts[i].map(([a, b]) => a + "/" + b).join(" · ") : p.id;
        return el("a", { class: "chip " + cls + (flipped.has(p.id) ? " flipped" : ""), href: fragment({ task: t.name, problem: p.id }),
          title: flipped.has(p.id) ? "flipped between A and B" : null }, label);
      })));
  }
  function verdictOptions(t) {
    const seen = new Set();
    t.runs.forEach((rows) => rows.forEach((r) => seen.add(r[C.status])));
    const opts = [["", "every verdict"]];
    if (t.kind !== "text") opts.push(["passed", "passed"], ["failed", "not passed"]);
    if (paired()) opts.push(["flipped", "flipped"], ["pass-fail", "pass -> fail"], ["fail-pass", "fail -> pass"]);
    [...seen].sort().forEach((v) => { if (v !== "passed" || t.kind === "text") opts.push([v, "status " + v]); });
    return opts;
  }
  function taskPage(main, t, s) {
    const meta = D.run.tasks.find((x) => x.name === t.name);
    put(main, el("h2", {}, t.name), pairedTest(t.name), metricsBox(meta), problemChips(t, s));
    const verdict = el("select", { id: "verdict", onchange: (e) => refine({ verdict: e.target.value }) },
      verdictOptions(t).map(([v, label]) => el("option", { value: v, selected: (s.verdict || "") === v ? "" : null }, label)));
    const problem = el("select", { id: "problem", onchange: (e) => refine({ problem: e.target.value }) },
      el("option", { value: "" }, "every problem"),
      t.problems.map((p) => el("option", { value: p.id, selected: s.problem === p.id ? "" : null }, p.id)));
    const search = el("input", { id: "q", type: "search", placeholder: "search prompt, completion, stderr", value: s.q || "",
      oninput: (e) => refine({ q: e.target.value }) });
    put(main, el("div", { class: "filters" }, "verdict ", verdict, "problem ", problem, search), el("div", { id: "table" }));
    table(t, s);
  }
  function refine(change) { // a filter changed: the fragment follows (without a new history entry) and the table is drawn again
    const t0 = performance.now();
    const s = Object.assign(state(), change);
    delete s.sample;
    history.replaceState(null, "", fragment(s));
    D.page = 0;
    table(D.tasks[s.task], s);
    D.timings.filter = performance.now() - t0;
  }
  function table(t, s) {
    const box = clear(document.getElementById("table"));
    const rows = filtered(t, s);
    const pages = Math.max(1, Math.ceil(rows.length / PAGE));
    D.page = Math.min(D.page, pages - 1);
    const shown = rows.slice(D.page * PAGE, D.page * PAGE + PAGE);
    const pager = el("div", { class: "pager" },
      el("span", { id: "count" }, rows.length + " of " + t.runs[0].length + " samples"),
      s.q && t.loaded.size < t.blocks.length ? el("span", { class: "muted" }, "(the samples' texts are still loading: " +
        t.loaded.size + " of " + t.blocks.length + " parts searched)") : null,
      el("button", { disabled: D.page === 0 ? "" : null, onclick: () => { D.page--; table(t, state()); } }, "previous"),
      "page " + (D.page + 1) + " of " + pages,
      el("button", { disabled: D.page >= pages - 1 ? "" : null, onclick: () => { D.page++; table(t, state()); } }, "next"));
    const head = ["problem", "sample"];
    const sides = paired() ? ["A ", "B "] : [""];
    sides.forEach((x) => head.push(x + "verdict", x + "CPU s", x + "wall s", x + "exit", x + "exit reason"));
    if (paired()) head.push("flip");
    if (t.kind === "text") head.push(t.score_label || "score");
    if (t.kind === "classification") head.push("label", "predicted");
    const body = shown.map((r) => {
      const b = pairOf(t, r), key = t.problems[r[C.p]].id + ":" + r[C.s];
      const cells = [el("td", {}, t.problems[r[C.p]].id), el("td", { class: "num" }, link(Object.assign({}, s, { sample: key }), String(r[C.s])))];
      (paired() ? [r, b] : [r]).forEach((x) => {
        if (!x) { cells.push(el("td", { colspan: 5, class: "muted" }, "no such sample")); return; }
        cells.push(el("td", { class: verdictClass(x[C.status]) }, link(Object.assign({}, s, { sample: key }), x[C.status])),
          el("td", { class: "num" }, fmt(x[C.cpu], 2)), el("td", { class: "num" }, fmt(x[C.wall], 2)),
          el("td", { class: "num" }, fmt(x[C.exit], 0)), el("td", {}, (x[C.detail] || "").slice(0, 160)));
      });
      if (paired()) {
        const f = flip(t, r);
        cells.push(el("td", { class: f === "pass-fail" ? "flip-down" : f === "fail-pass" ? "flip-up" : "" },
          f === "pass-fail" ? "▼ pass -> fail" : f === "fail-pass" ? "▲ fail -> pass" : ""));
      }
      if (t.kind === "text") cells.push(el("td", { class: "num" }, fmt(r[C.score])));
      if (t.kind === "classification") cells.push(el("td", {}, r[C.label]), el("td", {}, r[C.predicted]));
      return el("tr", { "data-sample": key }, cells);
    });
    put(box, pager, el("table", { id: "samples" }, el("tr", {}, head.map((h) => el("th", {}, h))), body));
  }

  // ---- a sample ----
  function section(title, text, open) {
    if (text === null || text === undefined || text === "") return null;
    return el("details", { open: open === false ? null : "" }, el("summary", {}, title), el("pre", {}, text));
  }
  function rawWithCut(t, side, r) {
    const raw = texts(t, side, r)[X.raw];
    if (!raw) return null;
    if (r[C.cut] == null) return section("Raw generation (the completion below was extracted from it)", raw);
    const cut = r[C.cut];
    return el("details", { open: "" }, el("summary", {}, "Raw generation (cut at character " + cut + " of " + raw.length + ")"),
      el("pre", { class: "raw" }, raw.slice(0, cut), el("span", { class: "cut", title: "the completion ends here" }, "✂ cut"),
        el("span", { class: "dropped" }, raw.slice(cut))));
  }
  function testsSection(t, p, r) {
    const codes = r[C.tests];
    const parts = [];
    if (codes && codes.length) {
      const names = p.test_names && p.test_names.length === codes.length ? p.test_names : null;
      const word = { 1: "pass", 0: "wrong", "-1": "error", "-2": "timeout" };
      const tally = {};
      codes.forEach((c) => { tally[word[c] || c] = (tally[word[c] || c] || 0) + 1; });
      parts.push(el("div", {}, "per test: " + Object.entries(tally).map(([k, n]) => k + " " + n).join(", ")));
      const failing = codes.map((c, i) => [c, i]).filter(([c]) => c !== 1);
      if (failing.length) parts.push(el("pre", { class: "failing-tests" }, failing.slice(0, 200).map(([c, i]) =>
        (names ? names[i] : "test " + i) + ": " + (word[c] || c) + "\n")));
    }
    if (r[C.failing]) {
      parts.push(el("div", {}, "failing tests (pytest's summary): " + r[C.failing].length + " of " + (p.test_names || []).length),
        el("pre", { class: "failing-tests" }, r[C.failing].map((name) => name + "\n")));
    }
    if (p.tests) parts.push(el("pre", {}, p.tests));
    return parts.length ? el("details", { open: "" }, el("summary", {}, "Tests"), parts) : null;
  }
  function facts(r) {
    const items = [["verdict", el("span", { class: verdictClass(r[C.status]) }, r[C.status])], ["passed", r[C.passed]],
      ["exit code", r[C.exit]], ["exit reason / limit hit", r[C.detail]], ["CPU s", fmt(r[C.cpu], 3)], ["wall s", fmt(r[C.wall], 3)],
      ["finish reason", r[C.finish]], ["answer", r[C.answer]], ["score", r[C.score]],
      ["sub-verdicts", r[C.subsets] ? Object.entries(r[C.subsets]).map(([k, v]) => k + " " + (v ? "passed" : "failed")).join(", ") : null],
      ["label", r[C.label]], ["predicted", r[C.predicted]],
      ["probabilities", r[C.probabilities] ? r[C.probabilities].map((x) => x.toFixed(3)).join(", ") : null]];
    return el("dl", { class: "facts" }, items.filter(([, v]) => v !== null && v !== undefined && v !== "")
      .map(([k, v]) => [el("dt", {}, k), el("dd", {}, v instanceof Node ? v : String(v))]));
  }
  function sampleColumn(t, side, p, r, title) {
    if (!r) return el("div", {}, el("h3", {}, title), el("p", { class: "muted" }, "this run has no such sample"));
    const out = paired() ? [el("h3", {}, title), facts(r)] : [];
    if (t.kind === "classification") return el("div", {}, out);
    const x = texts(t, side, r);
    out.push(section("Thinking", x[X.thinking], false), rawWithCut(t, side, r),
      section(t.kind === "text" ? "Hypothesis (the completion)" : "Completion as executed", completion(t, side, r)));
    if (t.kind === "text") out.push(section("Reference", p.reference));
    out.push(section("stdout", x[X.stdout]), section("stderr", x[X.stderr]));
    return el("div", {}, out);
  }
  function diff(a, b) { // a line diff (longest common subsequence) of the two completions
    const x = a.split("\n"), y = b.split("\n");
    if (x.length * y.length > 4e6) return el("p", { class: "muted" }, "too long to diff here");
    const n = x.length, m = y.length, L = Array.from({ length: n + 1 }, () => new Uint32Array(m + 1));
    for (let i = n - 1; i >= 0; i--) for (let j = m - 1; j >= 0; j--) L[i][j] = x[i] === y[j] ? L[i + 1][j + 1] + 1 : Math.max(L[i + 1][j], L[i][j + 1]);
    const lines = [];
    let i = 0, j = 0;
    while (i < n || j < m) {
      if (i < n && j < m && x[i] === y[j]) { lines.push(el("span", { class: "same" }, "  " + x[i])); i++; j++; }
      else if (j < m && (i === n || L[i][j + 1] >= L[i + 1][j])) { lines.push(el("span", { class: "ins" }, "+ " + y[j])); j++; }
      else { lines.push(el("span", { class: "del" }, "- " + x[i])); i++; }
    }
    return el("pre", { class: "diff" }, lines);
  }
  function samplePage(main, t, s) {
    const cut = s.sample.lastIndexOf(":");
    const pid = s.sample.slice(0, cut), n = Number(s.sample.slice(cut + 1));
    const pi = t.byProblem[pid];
    if (pi === undefined) { put(main, el("p", { class: "error" }, "no problem " + pid + " in " + t.name)); return; }
    const p = t.problems[pi];
    const rows = t.runs.map((_, side) => rowOf(t, side, pi * 1048576 + n));
    const back = Object.assign({}, s);
    delete back.sample;
    put(main, el("p", {}, link(back, "← back to the samples"), "  ", link({ task: t.name, problem: pid }, "every sample of " + pid)),
      el("h2", {}, t.name + " · " + pid + " · sample " + n));
    if (paired()) {
      const f = rows[1] ? flip(t, rows[0]) : "";
      if (f) put(main, el("p", { class: f === "pass-fail" ? "flip-down" : "flip-up" }, f === "pass-fail" ? "▼ flipped: passed in A, fails in B" : "▲ flipped: fails in A, passes in B"));
    }
    if (!paired() && rows[0]) put(main, facts(rows[0]));
    put(main, section("Prompt", p.prompt));
    if (paired()) {
      put(main, el("div", { class: "sides" }, sampleColumn(t, 0, p, rows[0], "A: " + D.run.runs[0].model), sampleColumn(t, 1, p, rows[1], "B: " + D.run.runs[1].model)));
      if (rows[0] && rows[1] && t.kind !== "classification") put(main, el("h3", {}, "Diff of the completions (A -> B)"), diff(completion(t, 0, rows[0]), completion(t, 1, rows[1])));
    } else put(main, sampleColumn(t, 0, p, rows[0], "sample " + n));
    put(main, testsSection(t, p, rows[0] || {}), section("Reference solution", t.kind === "text" ? null : p.reference, false));
  }

  // ---- dispatch ----
  function render() {
    const s = state(), main = clear(document.getElementById("main"));
    header(s);
    if (!D.run) { put(main, el("p", { class: "error" }, "data/run.js did not load: keep the data folder beside index.html")); return Promise.resolve(); }
    if (!s.task) { runPage(main); return Promise.resolve(); }
    put(main, el("p", { class: "muted" }, "Loading " + s.task + "…"));
    return load(s.task).then((t) => {
      const pi = s.sample ? t.byProblem[s.sample.slice(0, s.sample.lastIndexOf(":"))] : undefined;
      return (pi === undefined ? Promise.resolve() : loadTextsOf(t, pi)).then(() => {
        if (state().task !== s.task || state().sample !== s.sample) return;
        clear(main);
        if (s.sample) samplePage(main, t, s);
        else {
          taskPage(main, t, s);
          loadAllTexts(t);
        }
      });
    }).catch((err) => { clear(main).append(el("p", { class: "error" }, String(err.message || err))); });
  }
  window.addEventListener("hashchange", () => { D.page = 0; render(); });
  document.addEventListener("DOMContentLoaded", () => {
    render().then(() => {
      D.timings.firstRender = performance.now(); // since the navigation started (bench/view.py)
      document.body.setAttribute("data-rendered", String(D.timings.firstRender));
    });
  });
})();
