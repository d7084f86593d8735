/* GuideDesk reasoning playground: watches one run over server-sent events and draws each step as
 * it arrives — reasoning steps with their scores, the server's feedback, the sparkline of mean
 * scores, refinement states side by side, the final answer and the running totals.
 * Plain JS; everything from the server is inserted as text, never as HTML. */
(function () {
  "use strict";

  var SVG = "http://www.w3.org/2000/svg";

  function el(tag, className, text) {
    var node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  function num(value) {
    var n = typeof value === "number" ? value : parseFloat(value);
    return isNaN(n) ? null : n;
  }

  function csrfToken() {
    var input = document.querySelector("input[name=csrfmiddlewaretoken]");
    return input ? input.value : "";
  }

  /* `text` with every quoted sentence of `issues` wrapped in <mark> (title = the problem). */
  function highlighted(text, issues) {
    var container = el("div", "gd-quoted");
    text = String(text || "");
    var ranges = [];
    (issues || []).forEach(function (issue) {
      var quote = issue && issue.quote ? String(issue.quote) : "";
      if (!quote) return;
      var at = text.indexOf(quote);
      if (at >= 0) ranges.push({ start: at, end: at + quote.length, issue: issue });
    });
    ranges.sort(function (a, b) { return a.start - b.start; });
    var pos = 0;
    ranges.forEach(function (range) {
      if (range.start < pos) return; // overlapping quotes: the first one wins
      container.appendChild(document.createTextNode(text.slice(pos, range.start)));
      var mark = el("mark", "gd-issue gd-issue-" + (range.issue.kind || "other"),
        text.slice(range.start, range.end));
      mark.title = (range.issue.kind ? range.issue.kind + ": " : "") + (range.issue.problem || "");
      container.appendChild(mark);
      pos = range.end;
    });
    container.appendChild(document.createTextNode(text.slice(pos)));
    return container;
  }

  function Run(root) {
    this.root = root;
    this.steps = root.querySelector("[data-steps]");
    this.spark = root.querySelector("[data-sparkline]");
    this.target = num(root.getAttribute("data-target")) || 0.75;
    this.means = [];
    this.reasonCards = {};
    this.lastText = "";  // the most recent draft / improved text (what a critique is about)
    this.refRows = {};
  }

  Run.prototype.card = function (step, title) {
    var li = el("li", "gd-card gd-card-" + step.name);
    li.setAttribute("data-step-index", step.index);
    li.setAttribute("data-step-name", step.name);
    var head = el("div", "gd-card-head");
    head.appendChild(el("span", "gd-card-index", "#" + step.index));
    head.appendChild(el("strong", "gd-card-title", title || step.name));
    var tokens = (step.prompt_tokens || 0) + (step.completion_tokens || 0);
    if (tokens) head.appendChild(el("span", "gd-sub", tokens + " tokens · " + step.latency_ms + " ms"));
    li.appendChild(head);
    if (step.error) li.appendChild(el("p", "gd-errors", step.error));
    this.steps.appendChild(li);
    return li;
  };

  Run.prototype.rawJson = function (li, output) {
    var details = el("details", "gd-raw");
    details.appendChild(el("summary", null, "Raw output"));
    details.appendChild(el("pre", "gd-json", JSON.stringify(output, null, 2)));
    li.appendChild(details);
  };

  Run.prototype.addStep = function (step) {
    var out = step.output || {};
    var handler = this["show_" + step.name];
    if (handler) handler.call(this, step, out);
    else this.rawJson(this.card(step), out);
  };

  Run.prototype.show_reason_step = function (step, out) {
    var total = out.max_steps || "?";
    var li = this.card(step, "Step " + out.step + "/" + total);
    li.classList.add("gd-reason");
    var progressNode = this.root.querySelector("[data-progress]");
    if (progressNode && out.max_steps) progressNode.textContent = out.step + "/" + out.max_steps;
    var status = String(out.status || "continue");
    li.querySelector(".gd-card-head").appendChild(
      el("span", "gd-badge gd-badge-" + status, status === "final" ? "Final" : "Continue"));
    li.appendChild(el("p", "gd-content", out.content));
    var scores = out.scores || {};
    var list = el("ul", "gd-scores");
    Object.keys(scores).sort().forEach(function (key) {
      var value = num(scores[key]);
      if (value === null) return;
      var item = el("li", "gd-score");
      item.appendChild(el("span", "gd-score-key", key));
      var bar = el("span", "gd-bar");
      var fill = el("span", "gd-bar-fill");
      fill.style.width = Math.round(Math.max(0, Math.min(1, value)) * 100) + "%";
      bar.appendChild(fill);
      item.appendChild(bar);
      item.appendChild(el("span", "gd-score-value", value.toFixed(2)));
      list.appendChild(item);
    });
    li.appendChild(list);
    var mean = num(out.mean);
    if (mean !== null) {
      li.appendChild(el("p", "gd-mean", "Mean " + mean.toFixed(2) + " (target " + this.target.toFixed(2) + ")"));
      this.means.push(mean);
      this.drawSpark();
    }
    if (out.rationale) {
      li.appendChild(el("p", "gd-rationale-label gd-sub", "Model's rationale"));
      li.appendChild(el("p", "gd-rationale", out.rationale));
    }
    if (out.hypotheses && out.hypotheses.length) {
      var hyp = el("ul", "gd-hypotheses");
      out.hypotheses.forEach(function (h) {
        hyp.appendChild(el("li", null, (h.intent || "?") + " — " + (num(h.confidence) !== null ? num(h.confidence).toFixed(2) : "?")));
      });
      li.appendChild(el("p", "gd-sub", "Hypotheses"));
      li.appendChild(hyp);
    }
    this.reasonCards[out.step] = li;
  };

  Run.prototype.show_feedback = function (step, out) {
    var box = el("div", "gd-feedback");
    box.appendChild(el("p", "gd-sub", "Server feedback (LLM-generated) after step " + out.step));
    box.appendChild(el("p", null, out.feedback));
    var card = this.reasonCards[out.step];
    if (card) {
      box.setAttribute("data-step-index", step.index);
      card.appendChild(box);
    } else {
      this.card(step, "Server feedback").appendChild(box);
    }
  };

  Run.prototype.drawSpark = function () {
    var svg = this.spark;
    this.root.querySelector("[data-spark-box]").hidden = false;
    while (svg.firstChild) svg.removeChild(svg.firstChild);
    var w = 300, h = 60, pad = 4;
    function y(v) { return pad + (1 - Math.max(0, Math.min(1, v))) * (h - 2 * pad); }
    var line = document.createElementNS(SVG, "line");
    line.setAttribute("class", "gd-spark-target");
    line.setAttribute("x1", 0); line.setAttribute("x2", w);
    line.setAttribute("y1", y(this.target)); line.setAttribute("y2", y(this.target));
    svg.appendChild(line);
    var n = this.means.length;
    var step = n > 1 ? (w - 2 * pad) / (n - 1) : 0;
    var points = this.means.map(function (m, i) { return (pad + i * step) + "," + y(m); });
    var poly = document.createElementNS(SVG, "polyline");
    poly.setAttribute("class", "gd-spark-line");
    poly.setAttribute("points", points.join(" "));
    svg.appendChild(poly);
    this.means.forEach(function (m, i) {
      var dot = document.createElementNS(SVG, "circle");
      dot.setAttribute("class", "gd-spark-dot");
      dot.setAttribute("cx", pad + i * step); dot.setAttribute("cy", y(m)); dot.setAttribute("r", 2.5);
      var title = document.createElementNS(SVG, "title");
      title.textContent = "Step " + (i + 1) + ": " + m.toFixed(2);
      dot.appendChild(title);
      svg.appendChild(dot);
    });
    svg.setAttribute("aria-label", "Mean score per step: " +
      this.means.map(function (m) { return m.toFixed(2); }).join(", ") + "; target " + this.target);
    svg.setAttribute("data-points", n);
  };

  Run.prototype.refRow = function (iteration) {
    var section = this.root.querySelector("[data-refinement]");
    section.hidden = false;
    if (!this.refRows[iteration]) {
      var row = el("div", "gd-ref-row");
      row.setAttribute("data-iteration", iteration);
      ["draft", "critique", "final_spec"].forEach(function (state) {
        var cell = el("div", "gd-ref-cell gd-ref-" + state);
        cell.setAttribute("data-state", state);
        row.appendChild(cell);
      });
      section.querySelector("[data-refinement-rows]").appendChild(row);
      this.refRows[iteration] = row;
    }
    return this.refRows[iteration];
  };

  Run.prototype.show_refinement = function (step, out) {
    var state = out.state || "draft";
    var li = this.card(step, "Refinement · " + state.replace("_", " ") + " (iteration " + out.iteration + ")");
    // A critique of iteration k reads the draft / improved text before it: one row per critique.
    var iteration = state === "draft" ? 0 : (num(out.iteration) || 0);
    var row = this.refRow(state === "draft" ? 0 : iteration);
    var cell = row.querySelector('[data-state="' + state + '"]') || row.lastChild;
    if (out.failure) {
      li.appendChild(el("p", "gd-errors", out.failure));
      cell.appendChild(el("p", "gd-errors", out.failure));
      return;
    }
    if (state === "critique") {
      var score = num(out.score);
      var head = el("p", "gd-ref-score", score !== null ? "Score " + score + "/100" : "Critique");
      cell.appendChild(head);
      li.appendChild(el("p", null, score !== null ? "Score " + score + "/100" : ""));
      cell.appendChild(highlighted(this.lastText, out.issues));
      if (out.critique) {
        cell.appendChild(el("p", "gd-sub", out.critique));
        li.appendChild(el("p", null, out.critique));
      }
      var issues = el("ul", "gd-issues");
      (out.issues || []).forEach(function (issue) {
        var item = el("li", "gd-issue-item");
        item.appendChild(el("span", "gd-badge", issue.kind || "issue"));
        item.appendChild(el("q", null, issue.quote));
        item.appendChild(document.createTextNode(" — " + (issue.problem || "")));
        issues.appendChild(item);
      });
      cell.appendChild(issues);
      li.appendChild(issues.cloneNode(true));
    } else {
      this.lastText = out.text || "";
      cell.appendChild(el("p", "gd-ref-text", out.text));
      li.appendChild(el("p", "gd-content", out.text));
    }
  };

  Run.prototype.show_deliberation_end = function (step, out) {
    var li = this.card(step, "End of deliberation");
    li.appendChild(el("p", null, "Termination: " + out.termination + " after " + out.steps +
      " steps · best iteration " + out.best_iteration + " · final score " + out.final_score));
  };

  Run.prototype.show_clarify = function (step, out) {
    var li = this.card(step, "Clarifying question");
    li.appendChild(el("p", null, out.question));
    var options = el("div", "gd-options");
    (out.options || []).forEach(function (option) {
      var b = el("button", "gd-option", option);
      b.type = "button"; b.disabled = true;
      options.appendChild(b);
    });
    li.appendChild(options);
  };

  Run.prototype.showDraft = function (step, out, title) {
    var li = this.card(step, title);
    var facts = [];
    if (out.confidence !== undefined) facts.push("confidence " + out.confidence + "/10");
    facts.push("tool " + (out.tool_call || "—"));
    if (out.tool_call) facts.push(JSON.stringify(out.tool_params || {}));
    li.appendChild(el("p", "gd-sub", facts.join(" · ")));
    if (out.needs_more_context && out.needs_more_context.length)
      li.appendChild(el("p", "gd-sub", "Needs more context: " + out.needs_more_context.join(", ")));
    li.appendChild(el("p", "gd-content", out.response));
    this.rawJson(li, out);
  };
  Run.prototype.show_assess = function (step, out) { this.showDraft(step, out, "Assess"); };
  Run.prototype.show_synthesize = function (step, out) { this.showDraft(step, out, "Synthesize"); };
  Run.prototype.show_respond = function (step, out) { this.showDraft(step, out, "Respond"); };

  Run.prototype.show_critique = function (step, out) {
    var li = this.card(step, "Critique");
    li.appendChild(el("span", "gd-badge gd-badge-" + String(out.decision || "").toLowerCase(), out.decision));
    li.appendChild(el("p", null, out.reasoning));
    if (out.message) li.appendChild(el("p", "gd-sub", "To the customer: " + out.message));
  };

  Run.prototype.show_tool_not_run = function (step, out) {
    var li = this.card(step, "Tool not run (playground)");
    li.appendChild(el("p", null, "Guards: " + out.verdict + " " + (out.tool || "") + " " +
      JSON.stringify(out.params || {}) + (out.reason ? " (" + out.reason + ")" : "")));
    li.appendChild(el("p", "gd-sub", "Tools never run in the playground. The customer would have been told:"));
    li.appendChild(el("p", "gd-content", out.would_reply));
  };

  Run.prototype.show_context_fetch = function (step, out) {
    var li = this.card(step, "Context fetch");
    li.appendChild(el("p", null, "Fetched: " + ((out.fetched || []).join(", ") || "nothing") +
      ((out.unknown || []).length ? " · unknown keys: " + out.unknown.join(", ") : "")));
  };

  Run.prototype.show_guard = function (step, out) {
    var li = this.card(step, "Guards");
    li.appendChild(el("p", null, out.action + " " + (out.tool || "") + " — " + (out.reason || "")));
  };

  Run.prototype.show_refine_critique = function (step, out) {
    this.card(step, "Critique call (iteration " + out.iteration + ")").appendChild(
      el("p", "gd-sub", "Score " + out.score + "/100 · " + (out.issues || []).length + " issue(s) — see Refinement below"));
  };

  Run.prototype.show_improve = function (step, out) {
    this.card(step, "Improve call (iteration " + out.iteration + ")").appendChild(
      el("p", "gd-content", out.response));
  };

  Run.prototype.show_stopped = function (step) {
    this.card(step, "Stopped").appendChild(el("p", null, "Stopped from the playground before the next step."));
  };

  Run.prototype.updateRun = function (run) {
    var root = this.root;
    function set(selector, text) { var n = root.querySelector(selector); if (n) n.textContent = text; }
    var labels = { running: "Running", done: "Done", stopped: "Stopped by staff", failed: "Failed", replaying: "Replaying" };
    set("[data-status]", labels[run.status] || run.status);
    root.querySelector("[data-status]").className = "gd-run-status gd-run-" + run.status;
    set("[data-calls]", run.llm_calls);
    set("[data-tokens]", run.tokens);
    if (run.status !== "replaying") {
      set("[data-cost]", "$" + Number(run.cost_usd).toFixed(6));
      set("[data-billed]", "$" + Number(run.billed_usd).toFixed(6));
    }
    var progress = run.progress || {};
    if (progress.max_steps && progress.step) set("[data-progress]", progress.step + "/" + progress.max_steps);
    if (run.stop_requested && run.status === "running") set("[data-status]", "Stopping…");
    var stop = root.querySelector("[data-stop]");
    if (stop && run.status !== "running") stop.hidden = true;
    var replay = root.querySelector("[data-replay-link]");
    if (replay && run.status !== "running" && run.status !== "replaying") replay.hidden = false;
    if (run.error) {
      var error = root.querySelector("[data-error]");
      error.hidden = false;
      error.textContent = run.error;
    }
    if (run.final && (run.final.replies || []).length + (run.final.escalate ? 1 : 0) > 0) {
      var box = root.querySelector("[data-final]");
      var body = root.querySelector("[data-final-body]");
      while (body.firstChild) body.removeChild(body.firstChild);
      (run.final.replies || []).forEach(function (reply) {
        body.appendChild(el("p", "gd-final-text", reply.text));
        if (reply.data && reply.data.tool_not_run)
          body.appendChild(el("p", "gd-sub", "(" + reply.data.tool + ": " + reply.data.verdict + " — not run in the playground)"));
      });
      if (run.final.escalate)
        body.appendChild(el("p", "gd-sub", "A real turn would hand over to a person: " +
          run.final.escalate[0] + " — " + run.final.escalate[1]));
      box.hidden = false;
    }
  };

  Run.prototype.connect = function () {
    var self = this;
    var live = this.root.querySelector("[data-live]");
    var source = new EventSource(this.root.getAttribute("data-events-url"));
    source.onopen = function () { live.textContent = "Live"; live.classList.remove("gd-stale"); };
    source.addEventListener("step", function (event) { self.addStep(JSON.parse(event.data)); });
    source.addEventListener("run", function (event) { self.updateRun(JSON.parse(event.data)); });
    source.addEventListener("end", function () {
      source.close();
      live.textContent = self.root.getAttribute("data-replay") === "1" ? "Replay finished." : "Finished.";
      self.root.setAttribute("data-ended", "1");
    });
    source.onerror = function () {
      if (self.root.getAttribute("data-ended") === "1") return;
      live.textContent = "Reconnecting…";
      live.classList.add("gd-stale");
    };
    var form = this.root.querySelector("[data-stop-form]");
    if (form) {
      form.addEventListener("submit", function (event) {
        event.preventDefault();
        var button = form.querySelector("[data-stop]");
        button.disabled = true;
        button.textContent = "Stopping…";
        fetch(self.root.getAttribute("data-stop-url"), {
          method: "POST", credentials: "same-origin",
          headers: { Accept: "application/json", "X-CSRFToken": csrfToken() }
        }).then(function (response) {
          if (!response.ok) throw new Error("HTTP " + response.status);
          return response.json();
        }).then(function (data) {
          button.textContent = data.stopping ? "Stopping at the next step…" : "Already finished";
        }).catch(function () {
          button.disabled = false;
          button.textContent = "Stop the run";
          live.textContent = "Could not stop the run — try again.";
        });
      });
    }
  };

  document.addEventListener("DOMContentLoaded", function () {
    var root = document.getElementById("gd-run");
    if (root) new Run(root).connect();
  });
})();
