/* GuideDesk console inbox: re-renders the table from `inbox.json` (same filters as the page)
 * when the client's doorbell stream rings (server-sent events, any change to any of its
 * conversations), and polls when there is no doorbell (no Redis, runserver). Everything from
 * the server is inserted as text, never HTML. */
(function () {
  "use strict";

  var say = GDConsole.texts("gd-inbox-texts"); // static/console/common.js
  var el = GDConsole.el;
  var truncate = GDConsole.truncate;

  /* One row, as templates/console/inbox.html renders it; `labels` are the column headings
   * (each cell's data-label, shown beside the value when rows are stacked at narrow widths). */
  function row(r, labels) {
    var tr = el("tr", r.waiting ? "gd-row-waiting" : null);
    tr.dataset.conversation = r.id;
    tr.dataset.state = r.state;
    var title = el("td");
    var badge = el("span", "gd-channel gd-channel-" + r.channel, r.channel_label);
    badge.dataset.channel = r.channel;
    title.appendChild(badge);
    title.appendChild(document.createTextNode(" "));
    var link = el("a", null, r.title);
    link.href = r.url;
    title.appendChild(link);
    tr.appendChild(title);
    var customer = el("td");
    customer.dataset.customer = "";
    var who = r.customer || {};
    if (who.name) {
      customer.appendChild(el("strong", null, who.name));
      customer.appendChild(document.createTextNode(" "));
    }
    if (who.email) {
      customer.appendChild(el("span", "gd-email", who.email));
      customer.appendChild(document.createTextNode(" "));
    }
    if (!who.name && !who.email) customer.appendChild(document.createTextNode(say("anonymous") + " "));
    if (who.verified) {
      var badge = el("span", "gd-sub gd-verified", "✓ " + say("Verified"));
      badge.dataset.verified = "";
      customer.appendChild(badge);
    } else {
      customer.appendChild(el("span", "gd-sub", say("Not verified")));
    }
    tr.appendChild(customer);
    var state = el("td");
    state.appendChild(el("span", "gd-state gd-state-" + r.state, r.state_label));
    tr.appendChild(state);
    tr.appendChild(el("td", null, r.assignee || say("Unassigned")));
    var last = el("td");
    if (r.last_role_label) {
      last.appendChild(el("span", "gd-sub", r.last_role_label + ":"));
      last.appendChild(document.createTextNode(" "));
    }
    last.appendChild(document.createTextNode(truncate(r.last_text, 120)));
    tr.appendChild(last);
    var age = el("td");
    if (r.last_at) {
      var time = el("time", null, say("%(age)s ago", { age: r.age }));
      time.setAttribute("datetime", r.last_at);
      age.appendChild(time);
    }
    tr.appendChild(age);
    Array.prototype.forEach.call(tr.children, function (td, i) {
      if (labels[i]) td.dataset.label = labels[i];
    });
    return tr;
  }

  function render(root, data) {
    var tbody = root.querySelector("[data-rows]");
    var labels = Array.prototype.map.call(
      root.querySelectorAll("table.gd-inbox thead th"), function (th) { return th.textContent; });
    tbody.replaceChildren();
    if (!data.rows.length) {
      var tr = el("tr", "gd-empty-row");
      var td = el("td", null, say("No conversation matches these filters."));
      td.colSpan = labels.length || 6;
      tr.appendChild(td);
      tbody.appendChild(tr);
      return;
    }
    data.rows.forEach(function (r) { tbody.appendChild(row(r, labels)); });
  }

  function start(root) {
    var url = root.dataset.pollUrl;
    var seconds = Number(root.dataset.pollSeconds) || 5;
    var slow = Number(root.dataset.pushedPollSeconds) || 60;
    var live = root.querySelector("[data-live]");
    var timer = null;
    var pushed = false;
    var stopped = false;
    var inFlight = false;
    var again = false;

    function schedule() {
      if (stopped) return;
      clearTimeout(timer);
      timer = setTimeout(tick, (pushed ? slow : seconds) * 1000);
    }

    function tick() {
      if (document.hidden) return schedule();
      if (inFlight) { again = true; return; }
      inFlight = true;
      fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } })
        .then(function (response) {
          if (response.status === 401) { stopped = true; return null; }
          if (!response.ok) throw new Error("HTTP " + response.status);
          return response.json();
        })
        .then(function (data) {
          if (!data) return;
          render(root, data);
          root.dataset.refreshedAt = String(Date.now());
          if (live) live.classList.remove("gd-stale");
        })
        .catch(function () { if (live) live.classList.add("gd-stale"); })
        .then(function () {
          inFlight = false;
          if (again) { again = false; tick(); } else { schedule(); }
        });
    }

    document.addEventListener("visibilitychange", function () {
      if (!document.hidden && !stopped) tick();
    });
    schedule();
    var eventsUrl = root.dataset.eventsUrl;
    if (eventsUrl && window.EventSource) {
      var source = new EventSource(eventsUrl, { withCredentials: true });
      source.onopen = function () { pushed = true; root.dataset.pushed = "true"; };
      source.addEventListener("changed", function () { pushed = true; clearTimeout(timer); tick(); });
      source.onerror = function () { pushed = false; root.dataset.pushed = "false"; schedule(); };
    }
  }

  document.addEventListener("DOMContentLoaded", function () {
    var root = document.getElementById("gd-inbox");
    if (root) start(root);
  });
})();
