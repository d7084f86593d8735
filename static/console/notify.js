/*
 * Browser notifications for new hand-offs (opt-in, per browser). The console header gets a
 * toggle; once the staff member turns it on (and the browser allows notifications), every
 * escalation that appears in the client's queue while a console page is open raises one
 * notification; clicking it opens the conversation. The choice is kept in localStorage.
 *
 * Only while notifications are on, it listens to the same live doorbell as the queue page
 * (…/console/events, server-sent events) and fetches the queue (…/console/queue.json) when it
 * rings; without push (runserver, no Redis) it polls. Off, it opens no stream and polls nothing.
 * Escalations already open when it starts listening never notify. Plain JS, no build.
 */
(function () {
  "use strict";

  var script = document.currentScript;
  if (!script) return;
  var STORE_KEY = "guidedesk:console:notify-handoffs";
  var pollUrl = script.dataset.pollUrl;
  var eventsUrl = script.dataset.eventsUrl;
  var POLL_MS = Number(script.dataset.pollSeconds || "10") * 1000;
  var PUSHED_POLL_MS = 60000;
  var words = {
    off: script.dataset.labelOff,
    on: script.dataset.labelOn,
    blocked: script.dataset.labelBlocked,
    title: script.dataset.title,
  };
  var known = null; // open escalation ids seen so far (null: not loaded yet)
  var timer = null;
  var pushed = false;
  var listening = false;
  var source = null;

  function supported() {
    return "Notification" in window;
  }

  function wanted() {
    try { return window.localStorage.getItem(STORE_KEY) === "1"; } catch (e) { return false; }
  }

  function remember(on) {
    try {
      if (on) window.localStorage.setItem(STORE_KEY, "1");
      else window.localStorage.removeItem(STORE_KEY);
    } catch (e) { /* storage disabled: on for this page view only */ }
  }

  function active() {
    return wanted() && supported() && window.Notification.permission === "granted";
  }

  var button = document.createElement("button");
  button.type = "button";
  button.className = "gd-link-button gd-notify-toggle";
  button.setAttribute("data-notify-toggle", "");

  function render() {
    var blocked = supported() && window.Notification.permission === "denied";
    button.textContent = blocked ? words.blocked : active() ? words.on : words.off;
    button.setAttribute("aria-pressed", String(active()));
    button.disabled = !supported() || blocked;
  }

  button.addEventListener("click", function () {
    if (active()) {
      remember(false);
      stop();
      return render();
    }
    remember(true);
    var asked = window.Notification.requestPermission();
    Promise.resolve(asked).then(function (permission) {
      if (permission !== "granted") {
        remember(false);
        return render();
      }
      // "On" is shown once what is open now has been fetched: every hand-off after that
      // moment notifies, and none the staff member saw before turning it on.
      listen().then(render);
    });
  });

  function notify(row) {
    var body = row.reason + (row.last_customer_text ? " — " + row.last_customer_text : "");
    try {
      var note = new window.Notification(words.title, { body: body.slice(0, 180), tag: "gd-handoff-" + row.id });
      note.onclick = function () {
        window.focus();
        window.location.href = row.url;
      };
    } catch (e) { /* some browsers only notify from a service worker: nothing to do */ }
  }

  function refresh() {
    return fetch(pollUrl, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (response) { return response.ok ? response.json() : null; })
      .then(function (data) {
        if (!data || !Array.isArray(data.open)) return;
        var first = known === null;
        var seen = known || {};
        data.open.forEach(function (row) {
          if (!first && !seen[row.id] && active()) notify(row);
          seen[row.id] = true;
        });
        known = seen;
      })
      .catch(function () { /* offline for a moment: the next ring or poll catches up */ });
  }

  function schedule() {
    clearTimeout(timer);
    if (!listening) return;
    timer = setTimeout(function () { refresh().then(schedule); }, pushed ? PUSHED_POLL_MS : POLL_MS);
  }

  function listen() {
    if (listening) return Promise.resolve();
    listening = true;
    known = null; // what is open now is the baseline: it never notifies
    var baseline = refresh();
    baseline.then(schedule);
    if (eventsUrl && window.EventSource) {
      source = new EventSource(eventsUrl, { withCredentials: true });
      source.onopen = function () { pushed = true; };
      source.addEventListener("changed", function () { pushed = true; refresh(); });
      source.onerror = function () {
        pushed = false;
        if (source && source.readyState === 2) schedule();
      };
    }
    return baseline;
  }

  function stop() {
    listening = false;
    pushed = false;
    clearTimeout(timer);
    if (source) {
      source.close();
      source = null;
    }
  }

  function start() {
    var header = document.querySelector(".gd-clients") || document.querySelector(".gd-console-header");
    if (!header || !pollUrl) return;
    header.appendChild(button);
    render();
    if (active()) listen();
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
