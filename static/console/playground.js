/* GuideDesk reasoning playground: watches one run over server-sent events and draws each step as
 * it arrives, as the step views embedded in the page say (#gd-step-views, the specification in
 * apps/reasoning/rendering.py that the admin and `manage.py reason` use too); around them, the
 * sparkline of mean scores, the feedback under its reasoning step, refinement states side by
 * side, the final answer and the running totals.
 * Plain JS; everything from the server is inserted as text, never as HTML. */
(function () {
  "use strict";

  var SVG = "http://www.w3.org/2000/svg";

  var el = GDConsole.el; // static/console/common.js

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

  function Run(root, views) {
    this.root = root;
    this.views = views;  // the step views, by step name (apps/reasoning/rendering.py)
    this.steps = root.querySelector("[data-steps]");
    this.spark = root.querySelector("[data-sparkline]");
    this.target = num(root.getAttribute("data-target")) || 0.75;
    this.means = [];
    this.reasonCards = {};
    this.lastText = "";  // the most recent draft / improved text (what a critique is about)
    this.refRows = {};
  }

  /* The step's title from its view: `{field}` placeholders filled from the output. */
  function filled(template, out) {
    return String(template).replace(/\{(\w+)\}/g, function (_, key) {
      var value = out[key];
      return value === undefined || value === null || value === "" ? "?" : String(value).replace(/_/g, " ");
    });
  }

  function stepTitle(view, step) {
    return view ? filled(view.title, step.output || {}) : step.name;
  }

  function present(value) {
    if (value === undefined || value === null || value === "") return false;
    if (Array.isArray(value)) return value.length > 0;
    if (typeof value === "object") return Object.keys(value).length > 0;
    return true;
  }

  /* A field's label over a list of `items`, each drawn by `item` (it returns the <li>). */
  function labelledList(field, listClass, items, item) {
    var box = el("div", "gd-field");
    box.appendChild(el("p", "gd-sub", field.label));
    var list = el("ul", listClass);
    (items || []).forEach(function (each) { list.appendChild(item(each)); });
    box.appendChild(list);
    return box;
  }

  /* One output field, drawn the way its kind says (apps/reasoning/rendering.py). */
  var KINDS = {
    text: function (field, value) {
      var box = el("div", "gd-field gd-field-" + field.key);
      box.appendChild(el("p", "gd-sub gd-field-label", field.label));
      box.appendChild(el("p", "gd-content", value));
      return box;
    },
    list: function (field, value) {
      return el("p", "gd-sub", field.label + ": " + (Array.isArray(value) ? value.join(", ") : value));
    },
    json: function (field, value) {
      return el("p", "gd-sub", field.label + ": " + JSON.stringify(value));
    },
    scores: function (field, value) {
      var list = el("ul", "gd-scores");
      Object.keys(value || {}).sort().forEach(function (key) {
        var n = num(value[key]);
        if (n === null) return;
        var item = el("li", "gd-score");
        item.appendChild(el("span", "gd-score-key", key));
        var bar = el("span", "gd-bar");
        var fill = el("span", "gd-bar-fill");
        fill.style.width = Math.round(Math.max(0, Math.min(1, n)) * 100) + "%";
        bar.appendChild(fill);
        item.appendChild(bar);
        item.appendChild(el("span", "gd-score-value", n.toFixed(2)));
        list.appendChild(item);
      });
      return list;
    },
    issues: function (field, value) {
      var list = el("ul", "gd-issues");
      (value || []).forEach(function (issue) {
        var item = el("li", "gd-issue-item");
        item.appendChild(el("span", "gd-badge", issue.kind || "issue"));
        item.appendChild(el("q", null, issue.quote));
        item.appendChild(document.createTextNode(" — " + (issue.problem || "")));
        list.appendChild(item);
      });
      return list;
    },
    options: function (field, value) {
      var box = el("div", "gd-options");
      (value || []).forEach(function (option) {
        var b = el("button", "gd-option", option);
        b.type = "button"; b.disabled = true;
        box.appendChild(b);
      });
      return box;
    },
    citations: function (field, value) {
      return labelledList(field, "gd-citations", value, function (c) {
        return el("li", "gd-citation", (c.heading || c.title || "?") + " — chunk " +
          c.chunk + ", score " + c.score + ", " + c.tokens + " tokens");
      });
    },
    hypotheses: function (field, value) {
      return labelledList(field, "gd-hypotheses", value, function (h) {
        var c = num(h.confidence);
        return el("li", null, (h.intent || "?") + " — " + (c !== null ? c.toFixed(2) : "?"));
      });
    }
  };

  /* The body of a step as its view says: the facts and badges on one line, then each other
   * field; a step without a view shows its raw output. */
  function stepBody(view, step, node) {
    var out = step.output || {};
    if (!view) return;
    var facts = el("p", "gd-sub gd-facts-line");
    var shown = 0;
    view.fields.forEach(function (field) {
      var value = out[field.key];
      if (!present(value)) return;
      if (field.kind === "badge") {
        var text = field.labels && field.labels[value] !== undefined ? field.labels[value] : String(value);
        node.querySelector(".gd-card-head").appendChild(
          el("span", "gd-badge gd-badge-" + String(value).toLowerCase(), text));
      } else if (field.kind === "fact" || field.kind === "progress") {
        var shownValue = field.kind === "progress" ? value + "/" + (out[field.total] || "?")
          : (field.digits !== null && field.digits !== undefined && num(value) !== null
            ? num(value).toFixed(field.digits) : value) + (field.suffix || "");
        if (shown++) facts.appendChild(document.createTextNode(" · "));
        facts.appendChild(document.createTextNode(filled(field.label, out) + ": " + shownValue));
      }
    });
    if (shown) node.appendChild(facts);
    view.fields.forEach(function (field) {
      var value = out[field.key];
      var draw = KINDS[field.kind];
      var shownField = { key: field.key, kind: field.kind, label: filled(field.label, out) };
      if (draw && present(value)) node.appendChild(draw(shownField, value));
    });
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

  /* Every step is drawn from its view (the same specification the admin and `manage.py
   * reason` use); what the page adds around some steps — the sparkline, the feedback under its
   * reasoning step, the refinement table — is in `after_<name>`. */
  Run.prototype.addStep = function (step) {
    var out = step.output || {};
    var view = this.views[step.name];
    var hook = this["after_" + step.name];
    if (step.name === "feedback" && this.reasonCards[out.step]) {
      hook.call(this, step, out);  // drawn inside its reasoning step's card
      return;
    }
    var li = this.card(step, stepTitle(view, step));
    stepBody(view, step, li);
    this.rawJson(li, out);
    if (hook) hook.call(this, step, out, li);
  };

  Run.prototype.after_reason_step = function (step, out, li) {
    li.classList.add("gd-reason");
    var progressNode = this.root.querySelector("[data-progress]");
    if (progressNode && out.max_steps) progressNode.textContent = out.step + "/" + out.max_steps;
    var mean = num(out.mean);
    if (mean !== null) {
      li.appendChild(el("p", "gd-mean gd-sub", "Target " + this.target.toFixed(2)));
      this.means.push(mean);
      this.drawSpark();
    }
    this.reasonCards[out.step] = li;
  };

  Run.prototype.after_feedback = function (step, out, li) {
    var card = this.reasonCards[out.step];
    if (!card) return;  // no reasoning step to sit under: it has its own card
    var box = el("div", "gd-feedback");
    box.setAttribute("data-step-index", step.index);
    box.appendChild(el("p", "gd-sub", stepTitle(this.views.feedback, step)));
    stepBody(this.views.feedback, step, box);
    card.appendChild(box);
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

  /* The refinement states side by side: draft, critique (its issues marked on the text it
   * is about), improved — one row per iteration. */
  Run.prototype.after_refinement = function (step, out) {
    var state = out.state || "draft";
    var iteration = state === "draft" ? 0 : (num(out.iteration) || 0);
    var row = this.refRow(iteration);
    var cell = row.querySelector('[data-state="' + state + '"]') || row.lastChild;
    if (out.failure) {
      cell.appendChild(el("p", "gd-errors", out.failure));
      return;
    }
    if (state === "critique") {
      var score = num(out.score);
      cell.appendChild(el("p", "gd-ref-score", score !== null ? "Score " + score + "/100" : "Critique"));
      cell.appendChild(highlighted(this.lastText, out.issues));
      if (out.critique) cell.appendChild(el("p", "gd-sub", out.critique));
      cell.appendChild(KINDS.issues(null, out.issues));
    } else {
      this.lastText = out.text || "";
      cell.appendChild(el("p", "gd-ref-text", out.text));
    }
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
    var spec = document.getElementById("gd-step-views");
    if (root) new Run(root, spec ? JSON.parse(spec.textContent) : {}).connect();
  });
})();
