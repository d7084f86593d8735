/* Approvals in the console (templates/console/_approvals.html, approvals.html): keep the list
 * of held tool calls current without a reload. The server renders the rows; this script only
 * fetches the same page again and swaps the list in when something may have changed:
 * - on a conversation page, when its live message list (console.js) gains a message — a new
 *   request or a decision always posts one;
 * - on the approvals page, when the client's doorbell stream rings (data-events-url), else
 *   every few seconds.
 * A form being filled in (a deny reason typed) is never replaced under the user's hands. */
(function () {
  "use strict";
  var box = document.querySelector("[data-approvals-live]");
  if (!box) return;
  var busy = false;
  var again = false;

  function typing() {
    var active = document.activeElement;
    return active && box.contains(active) && active.tagName === "INPUT" && active.value;
  }

  function refresh() {
    if (busy) { again = true; return; }
    if (typing()) return;
    busy = true;
    // Marked partial: the page rendered for it leaves the flash messages unread, for the page
    // the browser loads next (templates/console/base.html).
    fetch(window.location.href, {
      credentials: "same-origin",
      headers: { Accept: "text/html", "X-GuideDesk-Partial": "approvals" },
    })
      .then(function (response) { return response.ok ? response.text() : null; })
      .then(function (html) {
        if (!html || typing()) return;
        var fresh = new DOMParser().parseFromString(html, "text/html")
          .querySelector("[data-approvals-live]");
        if (fresh && fresh.innerHTML !== box.innerHTML) {
          box.innerHTML = fresh.innerHTML;
          box.hidden = fresh.hidden;
        }
      })
      .catch(function () { /* the next change or tick tries again */ })
      .then(function () {
        busy = false;
        if (again) { again = false; refresh(); }
      });
  }

  var timer = null;
  function soon() {
    if (timer) clearTimeout(timer);
    timer = setTimeout(refresh, 300);
  }

  var messages = document.querySelector("[data-messages]");
  if (messages && window.MutationObserver) {
    new MutationObserver(soon).observe(messages, { childList: true });
    return;
  }
  var url = box.dataset.eventsUrl;
  var pushed = false;
  if (url && window.EventSource) {
    var source = new EventSource(url, { withCredentials: true });
    source.addEventListener("changed", function () { pushed = true; soon(); });
    source.onerror = function () { pushed = false; };
  }
  setInterval(function () { if (!pushed) refresh(); }, 5000);
})();
