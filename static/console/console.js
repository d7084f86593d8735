/* GuideDesk staff console: keeps the queue and a conversation up to date from small JSON
 * endpoints — fetched at once when the page's live doorbell (server-sent events) rings, and
 * polled every few seconds when there is no doorbell (no Redis, runserver). Plain JS, no
 * framework; everything from the server is inserted as text, never HTML (a rendered reply is
 * rebuilt from an allow-list of elements: `richText`). */
(function () {
  "use strict";

  // The console's own words in the page's language (templates/console/base.html); English
  // when a text is missing. The helpers are static/console/common.js.
  var say = GDConsole.texts("gd-console-texts");
  var el = GDConsole.el;
  var truncate = GDConsole.truncate;

  function localTime(iso) {
    var date = new Date(iso);
    if (isNaN(date.getTime())) return "";
    return date.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
  }

  function timeNode(iso) {
    var node = el("time", null, localTime(iso));
    node.setAttribute("datetime", iso);
    return node;
  }

  /* Polls `url` every `seconds` (paused while the tab is hidden); `onData(json)` may return a new
   * URL to poll next. Marks the "Updates live." label stale when the server does not answer.
   * With `root.dataset.eventsUrl` and EventSource, a doorbell stream makes it fetch at once when
   * something changed; while the doorbell is open it polls only every `pushedPollSeconds`. */
  function poller(root, url, seconds, onData) {
    var live = root.querySelector("[data-live]");
    var timer = null;
    var stopped = false;
    var pushed = false;
    var slowSeconds = Number(root.dataset.pushedPollSeconds) || 60;

    function setState(ok, text) {
      if (!live) return;
      live.classList.toggle("gd-stale", !ok);
      live.textContent = text;
    }

    function schedule() {
      if (stopped) return;
      clearTimeout(timer);
      timer = setTimeout(tick, (pushed ? slowSeconds : seconds) * 1000);
    }

    function tick() {
      if (document.hidden) return schedule();
      fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } })
        .then(function (response) {
          if (response.status === 401) {
            stopped = true;
            setState(false, say("Signed out — reload the page to sign in again."));
            return null;
          }
          if (!response.ok) throw new Error("HTTP " + response.status);
          return response.json();
        })
        .then(function (data) {
          if (!data) return;
          var next = onData(data);
          if (next) url = next;
          setState(true, say("Updates live."));
        })
        .catch(function () {
          setState(false, say("Cannot reach the server; retrying…"));
        })
        .then(schedule);
    }

    document.addEventListener("visibilitychange", function () {
      if (!document.hidden && !stopped) tick();
    });
    schedule();
    doorbell(root.dataset.eventsUrl, function (open) {
      pushed = open;
      if (stopped) return;
      if (open) {
        clearTimeout(timer);
        tick();  // it rang (or just opened: catch up on anything since the page was served)
      } else {
        schedule();  // lost: poll at the normal pace until it is back
      }
    });
  }

  /* Opens the live doorbell: `onChange(true)` when it opens and each time it rings,
   * `onChange(false)` when it is lost (EventSource reconnects by itself; a 204 answer — no push
   * on this server — closes it for good). */
  function doorbell(url, onChange) {
    if (!url || !window.EventSource) return;
    var source = new EventSource(url, { withCredentials: true });
    source.onopen = function () { onChange(true); };
    source.addEventListener("changed", function () { onChange(true); });
    source.onerror = function () { onChange(false); };
  }

  /* ------------------------------------------------------------------ the queue */

  /* One row, as templates/console/queue.html renders it; `labels` are the column headings
   * (each cell's data-label, shown beside the value when rows are stacked at narrow widths). */
  function queueRow(row, resolved, labels) {
    var tr = el("tr");
    var link = el("a", null, row.title);
    link.href = row.url;
    var first = el("td");
    first.appendChild(link);
    tr.appendChild(first);

    var reason = el("td", null, row.reason);
    if (row.detail) reason.appendChild(el("div", "gd-sub", truncate(row.detail, 80)));
    tr.appendChild(reason);

    var age = el("td");
    var time = el("time", null, resolved ? say("%(age)s ago", { age: row.age }) : row.age);
    time.setAttribute("datetime", row.created_at);
    age.appendChild(time);
    tr.appendChild(age);

    var last = el("td", null, row.last_customer_text ? truncate(row.last_customer_text, 120) : "—");
    if (row.last_customer_text && !resolved && row.last_customer_age) {
      last.appendChild(el("div", "gd-sub", say("%(age)s ago", { age: row.last_customer_age })));
    }
    tr.appendChild(last);
    tr.appendChild(el("td", null, row.assigned_to || say("Unassigned")));
    Array.prototype.forEach.call(tr.children, function (td, i) {
      if (labels[i]) td.dataset.label = labels[i];
    });
    return tr;
  }

  function fillRows(tbody, rows, resolved, emptyText) {
    if (!tbody) return;
    var labels = Array.prototype.map.call(
      tbody.closest("table").querySelectorAll("thead th"), function (th) { return th.textContent; });
    tbody.replaceChildren();
    if (!rows.length) {
      var tr = el("tr", "gd-empty-row");
      var td = el("td", null, emptyText);
      td.colSpan = 5;
      tr.appendChild(td);
      tbody.appendChild(tr);
      return;
    }
    rows.forEach(function (row) { tbody.appendChild(queueRow(row, resolved, labels)); });
  }

  function startQueue(root) {
    poller(root, root.dataset.pollUrl, Number(root.dataset.pollSeconds) || 5, function (data) {
      fillRows(root.querySelector('[data-rows="open"]'), data.open, false,
        say("Nothing waiting. The assistant is handling every conversation."));
      fillRows(root.querySelector('[data-rows="recently_resolved"]'), data.recently_resolved, true,
        say("None yet."));
      var count = root.querySelector("[data-open-count]");
      if (count) count.textContent = String(data.open.length);
    });
  }

  /* ------------------------------------------------------------------ a conversation */

  function messageItem(m) {
    var li;
    if (m.visibility === "internal") {
      li = el("li", "gd-msg gd-internal");
      var details = el("details");
      var summary = el("summary");
      summary.appendChild(el("span", "gd-kind", m.kind_label));
      summary.appendChild(document.createTextNode(" "));
      summary.appendChild(el("span", "gd-preview", truncate(m.text, 110)));
      summary.appendChild(document.createTextNode(" "));
      summary.appendChild(timeNode(m.created_at));
      details.appendChild(summary);
      if (m.text) details.appendChild(el("div", "gd-msg-text", m.text));
      if (m.data_json) details.appendChild(el("pre", "gd-json", m.data_json));
      li.appendChild(details);
    } else {
      li = el("li", "gd-msg gd-role-" + m.role);
      var meta = el("div", "gd-meta");
      meta.appendChild(el("span", "gd-who", m.role_label));
      if (m.author) meta.appendChild(document.createTextNode(" · " + m.author));
      if (m.kind !== "text") {
        meta.appendChild(document.createTextNode(" · "));
        meta.appendChild(el("span", "gd-kind", m.kind_label));
      }
      meta.appendChild(document.createTextNode(" · "));
      meta.appendChild(timeNode(m.created_at));
      li.appendChild(meta);
      li.appendChild(m.html ? richText(m.html, m.text) : el("div", "gd-msg-text", m.text));
      var sources = sourcesList(m.sources, sourcesLabel);
      if (sources) li.appendChild(sources);
    }
    li.dataset.seq = String(m.seq);
    return li;
  }

  /* A reply as the server rendered it (apps/conversations/rendering.py: bold, italics, lists,
   * http(s)/mailto links). Parsed in an inert document — nothing in it loads or runs — and
   * rebuilt element by element: only these tags and attributes, text as text. */
  var RICH = { P: 1, BR: 1, STRONG: 1, EM: 1, CODE: 1, UL: 1, OL: 1, LI: 1, A: 1 };
  var RICH_LINK = /^(https?:|mailto:)/i;

  function richText(html, text) {
    var doc = null;
    try { doc = new DOMParser().parseFromString(html, "text/html"); } catch (e) { doc = null; }
    if (!doc || !doc.body) return el("div", "gd-msg-text", text);
    var box = el("div", "gd-msg-text gd-rich");
    box.setAttribute("dir", "auto");
    copyRich(doc.body, box);
    return box;
  }

  function copyRich(from, to) {
    Array.prototype.forEach.call(from.childNodes, function (child) {
      if (child.nodeType === 3) {
        to.appendChild(document.createTextNode(child.nodeValue));
        return;
      }
      if (child.nodeType !== 1) return;
      var tag = child.tagName.toUpperCase();
      var href = tag === "A" ? String(child.getAttribute("href") || "") : "";
      if (!RICH[tag] || (tag === "A" && !RICH_LINK.test(href))) {
        copyRich(child, to);  // not ours: its text only
        return;
      }
      var node = document.createElement(tag.toLowerCase());
      if (tag === "A") {
        node.setAttribute("href", href);
        node.setAttribute("target", "_blank");
        node.setAttribute("rel", "noopener noreferrer nofollow");
      } else if (tag === "OL") {
        var start = parseInt(child.getAttribute("start") || "", 10);
        if (start > 0) node.setAttribute("start", String(start));
      }
      copyRich(child, node);
      to.appendChild(node);
    });
  }

  /* The help-centre articles a knowledge answer came from, as the customer sees them. */
  var sourcesLabel = "";

  function sourcesList(sources, label) {
    if (!Array.isArray(sources) || !sources.length) return null;
    var box = el("div", "gd-sources");
    box.setAttribute("role", "group");
    box.setAttribute("aria-label", label);
    box.appendChild(el("span", "gd-sources-label", label));
    var list = el("ul");
    sources.forEach(function (source) {
      if (!source || typeof source.title !== "string" || !source.title) return;
      var url = typeof source.url === "string" && /^https?:\/\//i.test(source.url) ? source.url : "";
      var title = el(url ? "a" : "span", null, source.title);
      title.setAttribute("dir", "auto");
      if (url) {
        title.setAttribute("href", url);
        title.setAttribute("target", "_blank");
        title.setAttribute("rel", "noopener noreferrer");
      }
      var item = el("li");
      item.appendChild(title);
      list.appendChild(item);
    });
    box.appendChild(list);
    return box;
  }

  function updateEscalation(root, escalation, data) {
    var status = root.querySelector("[data-status]");
    if (status) {
      status.textContent = data.status_label;
      status.className = "gd-status gd-status-" + data.status;
    }
    var panel = root.querySelector("[data-escalation]");
    if (!panel) return;
    panel.hidden = !escalation;
    if (!escalation) return;
    var fields = {
      "[data-esc-reason]": escalation.reason,
      "[data-esc-detail]": escalation.detail || "—",
      "[data-esc-age]": escalation.age,
      "[data-esc-assignee]": escalation.assigned_to || say("Unassigned"),
    };
    Object.keys(fields).forEach(function (selector) {
      var node = panel.querySelector(selector);
      if (node) node.textContent = fields[selector];
    });
  }

  function startConversation(root) {
    var list = root.querySelector("[data-messages]");
    sourcesLabel = list.dataset.sourcesLabel || "Sources";
    var lastSeq = Number(root.dataset.lastSeq) || 0;
    var base = root.dataset.pollUrl;

    function urlAfter(seq) {
      var url = new URL(base, window.location.href);
      url.searchParams.set("after", String(seq));
      return url.toString();
    }

    var toggle = root.querySelector("[data-toggle-internal]");
    if (toggle) {
      toggle.addEventListener("click", function () {
        var open = toggle.dataset.open !== "true";
        root.querySelectorAll(".gd-internal details").forEach(function (d) { d.open = open; });
        toggle.dataset.open = String(open);
        toggle.textContent = open ? say("Collapse all internal") : say("Expand all internal");
      });
    }

    poller(root, urlAfter(lastSeq), Number(root.dataset.pollSeconds) || 5, function (data) {
      var nearBottom = window.innerHeight + window.scrollY >= document.body.scrollHeight - 80;
      var empty = list.querySelector("[data-empty]");
      data.messages.forEach(function (m) {
        if (m.seq <= lastSeq) return;
        if (empty) { empty.remove(); empty = null; }
        list.appendChild(messageItem(m));
        lastSeq = m.seq;
      });
      updateEscalation(root, data.open_escalation, data);
      if (data.messages.length && nearBottom) list.lastElementChild.scrollIntoView({ block: "end" });
      return urlAfter(lastSeq);
    });
  }

  /* The navigation menu (templates/console/base.html) needs no script; where a browser cannot
   * show a closed <details>' content at wide widths (no `::details-content`), open it there. */
  function wideMenu() {
    var menu = document.querySelector("[data-menu]");
    if (!menu || !window.matchMedia) return;
    if (window.CSS && CSS.supports && CSS.supports("selector(::details-content)")) return;
    var wide = window.matchMedia("(min-width: 56rem)");
    var sync = function () { if (wide.matches) menu.open = true; };
    sync();
    if (wide.addEventListener) wide.addEventListener("change", sync);
  }

  document.addEventListener("DOMContentLoaded", function () {
    wideMenu();
    document.querySelectorAll("time[datetime]").forEach(function (node) {
      if (/^\d\d:\d\d$/.test(node.textContent.trim())) node.textContent = localTime(node.getAttribute("datetime"));
    });
    var queue = document.getElementById("gd-queue");
    if (queue) startQueue(queue);
    var conversation = document.getElementById("gd-conversation");
    if (conversation) startConversation(conversation);
  });
})();
