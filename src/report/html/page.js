"use strict";
// The task list of report.html. DATA (above) holds every task; rows are
// built as one string per filter change, and a task's rounds only when it
// is opened. All text goes through esc(): model replies are hostile.
(function () {
  const FILTERS = [
    ["all", "all", () => true],
    ["failed", "failed", (t) => !t.last],
    ["killed", "killed", (t) => t.killed],
    ["recovered", "recovered", (t) => !t.first && t.last],
    ["regressed", "regressed", (t) => t.first && !t.last],
  ];
  const state = { filter: "all", tag: "", arm: "", q: "", open: "" };
  const $ = (id) => document.getElementById(id);
  const list = $("tasks");

  function esc(s) {
    return String(s)
      .replace(/&/g, "&amp;")
      .replace(/</g, "&lt;")
      .replace(/>/g, "&gt;")
      .replace(/"/g, "&quot;")
      .replace(/'/g, "&#39;");
  }

  function readHash() {
    const params = new URLSearchParams(location.hash.replace(/^#/, ""));
    const f = params.get("filter") || "all";
    state.filter = FILTERS.some((x) => x[0] === f) ? f : "all";
    state.tag = params.get("tag") || "";
    state.arm = params.get("arm") || "";
    state.q = params.get("q") || "";
    state.open = params.get("open") || "";
  }

  function writeHash() {
    const params = new URLSearchParams();
    if (state.filter !== "all") params.set("filter", state.filter);
    if (state.tag) params.set("tag", state.tag);
    if (state.arm) params.set("arm", state.arm);
    if (state.q) params.set("q", state.q);
    if (state.open) params.set("open", state.open);
    const hash = params.toString();
    history.replaceState(null, "", hash ? "#" + hash : location.pathname + location.search);
  }

  function matches(t) {
    const pass = FILTERS.find((x) => x[0] === state.filter)[2];
    return (
      pass(t) &&
      (!state.tag || (t.tags || []).includes(state.tag)) &&
      (!state.arm || t.arm === state.arm) &&
      (!state.q || t.id.toLowerCase().includes(state.q.toLowerCase()))
    );
  }

  function roundClass(r) {
    if (r.kind === "infra_error") return "warn";
    if (r.killed) return "bad";
    if (r.verdict && r.verdict !== "ok") return "bad";
    if (!r.verdict) return "";
    return "ok";
  }

  function chip(r) {
    let label = r.kind === "infra_error" ? "infra" : r.verdict || (r.kept_answer ? "kept" : "no code");
    if (r.verdict === "error" && r.error) label = r.error.split(":")[0];
    return '<span class="chip ' + roundClass(r) + '" title="round ' + r.round + '">' +
      r.round + " " + esc(label) + "</span>";
  }

  function row(t, i) {
    const status = !t.rounds.length
      ? '<span class="badge warn">not run</span>'
      : t.last
        ? '<span class="badge ok">correct</span>'
        : '<span class="badge bad">wrong</span>';
    const extra =
      (!t.finished && t.rounds.length ? '<span class="badge warn">unfinished</span>' : "") +
      (t.killed ? '<span class="badge bad">killed</span>' : "") +
      (t.infra ? '<span class="badge warn">infra error</span>' : "") +
      (!t.first && t.last ? '<span class="badge ok">recovered</span>' : "") +
      (t.first && !t.last ? '<span class="badge bad">regressed</span>' : "");
    const arm = DATA.arms.length > 1 ? '<span class="badge">' + esc(t.arm) + "</span>" : "";
    const tags = (t.tags || []).map((g) => '<span class="badge tag">' + esc(g) + "</span>").join("");
    return '<details class="task-row" data-index="' + i + '"><summary><span class="id">' +
      esc(t.id) + "</span>" + arm + status + extra + '<span class="chips">' +
      t.rounds.map(chip).join("") + "</span>" + tags + "</summary></details>";
  }

  function render() {
    const shown = [];
    DATA.tasks.forEach((t, i) => { if (matches(t)) shown.push(row(t, i)); });
    list.innerHTML = shown.length ? shown.join("") : '<p class="empty">No task matches.</p>';
    $("shown").textContent = shown.length + " of " + DATA.tasks.length + " shown";
    $("shown").dataset.shown = String(shown.length);
    for (const b of document.querySelectorAll("#filters button")) {
      b.setAttribute("aria-pressed", String(b.dataset.filter === state.filter));
    }
    $("tag").value = state.tag;
    $("arm").value = state.arm;
    if ($("search").value !== state.q) $("search").value = state.q;
  }

  function pre(label, text, open) {
    if (!text) return "";
    const note = text.full
      ? '<p class="note">shortened from ' + text.full + " characters; the full text is in results.jsonl</p>"
      : "";
    const body = "<pre>" + esc(text.text) + "</pre>" + note;
    return open
      ? "<h5>" + esc(label) + "</h5>" + body
      : "<details><summary>" + esc(label) + "</summary>" + body + "</details>";
  }

  function kv(pairs) {
    const items = pairs
      .filter((p) => p[1] !== undefined && p[1] !== null && p[1] !== "")
      .map((p) => "<dt>" + esc(p[0]) + "</dt><dd>" + esc(p[1]) + "</dd>");
    return items.length ? '<dl class="kv">' + items.join("") + "</dl>" : "";
  }

  function check(c) {
    if (!c) return "no answer checked yet";
    let s = (c.correct ? "correct" : "wrong") + " — rule " + c.rule;
    if (c.extracted != null) s += ", read " + c.extracted;
    if (c.normalized != null && c.normalized !== c.extracted) s += " → " + c.normalized;
    if (c.tolerance != null) s += ", tolerance " + c.tolerance;
    if (c.parts && c.parts.length) {
      s += "; parts: " + c.parts.map((p) => p.name + " " + (p.correct ? "✓" : "✗")).join(", ");
    }
    return s;
  }

  // A token count, or "unknown" when the server's was no count.
  function count(n) {
    return n === null || n === undefined ? "unknown" : String(n);
  }

  function roundHtml(r) {
    let h = '<div class="round ' + roundClass(r) + '"><h4>Round ' + r.round + "</h4>";
    h += r.prompt
      .map((m) => pre("prompt: " + m[0], { text: DATA.strings[m[1]] }, false))
      .join("");
    h += pre("reply", r.reply, false);
    h += pre("extracted code" + (r.extraction ? " — " + r.extraction : ""), r.code, true);
    h += kv([
      ["verdict", r.verdict ? r.verdict + (r.flags && r.flags.length ? " (" + r.flags.join(", ") + ")" : "") : "nothing ran"],
      ["error", r.error],
      ["answer", r.answer],
      ["check", check(r.check)],
      ["correct after round", r.correct ? "yes" : "no"],
      ["kept answer", r.kept_answer ? "yes" : ""],
      ["policy", r.policy],
      ["hides the error (masking)", r.masking && r.masking.length ? r.masking.join(", ") : ""],
      ["masking not checked", r.masking_unchecked],
      ["round 0 shared from", r.shared_from],
      ["injected fault", r.fault],
      ["model note", r.note],
      ["infrastructure error", r.infra_error],
      ["next message", r.feedback_kind],
      ["stopped", r.stop],
      ["time (ms)", "model " + r.ms[0].toFixed(0) + ", exec " + r.ms[1].toFixed(0) + ", total " + r.ms[2].toFixed(0)],
      ["tokens", count(r.tokens[0]) + " prompt, " + count(r.tokens[1]) + " completion"],
    ]);
    if (r.installs && r.installs.length) {
      h += "<h5>install steps</h5><ul>" + r.installs.map((s) => "<li>" + esc(s) + "</li>").join("") + "</ul>";
    }
    h += pre("parsed traceback", r.traceback, true);
    h += pre("raw traceback", r.traceback_raw, false);
    h += pre("stdout", r.stdout, true);
    h += pre("stderr", r.stderr, false);
    if (r.artifacts && r.artifacts.length) {
      h += '<div class="artifacts"><h5>plots produced</h5>';
      for (const a of r.artifacts) {
        h += a.src
          ? '<img alt="' + esc(a.path) + '" src="' + esc(a.src) + '">'
          : '<p class="note">' + esc(a.path) + ": " + esc(a.missing) + "</p>";
      }
      h += "</div>";
    }
    return h + "</div>";
  }

  function showRounds(d) {
    if (d.dataset.rendered) return;
    const t = DATA.tasks[Number(d.dataset.index)];
    const div = document.createElement("div");
    div.className = "rounds";
    div.innerHTML = t.rounds.length ? t.rounds.map(roundHtml).join("") : '<p class="empty">No round recorded.</p>';
    d.appendChild(div);
    d.dataset.rendered = "1";
  }

  list.addEventListener("toggle", (e) => {
    const d = e.target;
    if (d.classList && d.classList.contains("task-row") && d.open) showRounds(d);
  }, true);

  // `#open=<task id>` opens that task's rows (every arm), rounds shown.
  function openFromHash() {
    if (!state.open) return;
    for (const d of list.querySelectorAll(".task-row")) {
      if (DATA.tasks[Number(d.dataset.index)].id === state.open) {
        showRounds(d);
        d.open = true;
      }
    }
  }

  const filters = $("filters");
  for (const [key, label] of FILTERS) {
    const b = document.createElement("button");
    b.type = "button";
    b.dataset.filter = key;
    b.textContent = label;
    b.addEventListener("click", () => { state.filter = key; writeHash(); render(); });
    filters.appendChild(b);
  }
  for (const g of DATA.tags) $("tag").add(new Option(g, g));
  if (DATA.arms.length > 1) {
    $("arm-label").hidden = false;
    for (const a of DATA.arms) $("arm").add(new Option(a, a));
  }
  $("tag").addEventListener("change", (e) => { state.tag = e.target.value; writeHash(); render(); });
  $("arm").addEventListener("change", (e) => { state.arm = e.target.value; writeHash(); render(); });
  $("search").addEventListener("input", (e) => { state.q = e.target.value; writeHash(); render(); });
  window.addEventListener("hashchange", () => { readHash(); render(); openFromHash(); });
  readHash();
  render();
  openFromHash();
  document.body.dataset.ready = "1";
})();
