/* GuideDesk console: flag the assistant's replies and teach from staff replies
 * (templates/console/_flags.html). Adds a "Flag" button to each of the assistant's visible
 * replies and a "Teach from this reply" button to each staff reply in the thread — replies that
 * arrive live included — and shows the flags already made, each with "Save as test case".
 * Agents and above act; viewers see the flags only. Everything is inserted as text. */
(function () {
  "use strict";

  var root = document.querySelector("[data-flags]");
  var thread = document.querySelector("[data-messages]");
  if (!root || !thread) return;
  var dialog = document.querySelector("[data-flag-dialog]");
  var form = dialog && dialog.querySelector("[data-flag-form]");
  var PLACEHOLDER = "00000000-0000-0000-0000-000000000000";
  var csrf = (root.querySelector("[name=csrfmiddlewaretoken]") || {}).value || "";

  var say = GDConsole.texts("gd-flags-texts"); // static/console/common.js
  var el = GDConsole.el;

  var state = { canAct: false, messages: {}, flags: {} }; // by seq
  var target = null; // the message being flagged

  function post(url, fields) {
    var body = new URLSearchParams();
    Object.keys(fields).forEach(function (k) { body.append(k, fields[k]); });
    return fetch(url, {
      method: "POST",
      credentials: "same-origin",
      headers: { "X-CSRFToken": csrf, Accept: "application/json" },
      body: body
    }).then(function (r) {
      return r.json().catch(function () { return {}; }).then(function (data) {
        if (!r.ok) {
          var error = (data && data.error) || {};
          var fields = error.fields || {};
          var first = Object.keys(fields).map(function (k) { return fields[k]; })[0];
          throw new Error(first || error.message || String(r.status));
        }
        return data;
      });
    });
  }

  // "Proposed for review: <title>", the title linking to the proposal's review page.
  function proposed(proposal) {
    var line = el("div", "gd-help");
    var parts = say("Proposed for review: %(title)s", { title: "\u0000" }).split("\u0000");
    line.appendChild(document.createTextNode(parts[0] || ""));
    var link = el("a", null, proposal.title);
    link.href = proposal.review_url;
    line.appendChild(link);
    line.appendChild(document.createTextNode(parts[1] || ""));
    return line;
  }

  function flagLine(li, flag) {
    var line = el("div", "gd-flag gd-flag-" + flag.reason);
    line.dataset.flag = flag.id;
    line.appendChild(el("strong", null, say("Flagged: %(reason)s", { reason: flag.reason_label })));
    if (flag.correction) line.appendChild(el("div", "gd-sub", say("Correction: %(text)s", { text: flag.correction })));
    if (state.canAct) {
      var save = el("button", "gd-link-button", say("Save as test case"));
      save.type = "button";
      save.dataset.saveCase = flag.id;
      save.addEventListener("click", function () {
        save.disabled = true;
        post(flag.case_url, {}).then(function (data) {
          save.replaceWith(el("span", "gd-help", say("Saved as test case %(name)s", { name: data.case.name })));
        }, function (error) {
          save.disabled = false;
          save.replaceWith(el("span", "gd-errors", say("Could not save: %(message)s", { message: error.message })));
        });
      });
      line.appendChild(save);
    }
    li.appendChild(line);
  }

  function decorate(li) {
    var seq = Number(li.dataset.seq);
    var message = state.messages[seq];
    if (!message || li.dataset.flagsDone) return;
    li.dataset.flagsDone = "1";
    li.dataset.messageId = message.id;
    (state.flags[seq] || []).forEach(function (flag) { flagLine(li, flag); });
    if (!state.canAct) return;
    var button;
    if (message.role === "assistant") {
      button = el("button", "gd-link-button gd-flag-button", say("Flag"));
      button.dataset.flagMessage = message.id;
      button.addEventListener("click", function () { openDialog(li, message); });
    } else {
      button = el("button", "gd-link-button gd-teach-button", say("Teach from this reply"));
      button.dataset.teachMessage = message.id;
      button.addEventListener("click", function () {
        button.disabled = true;
        post(root.dataset.teachUrl.replace(PLACEHOLDER, message.id), { teach_as: "faq" }).then(function (data) {
          button.replaceWith(proposed(data.proposal));
        }, function (error) {
          button.disabled = false;
          button.after(el("span", "gd-errors", say("Could not save: %(message)s", { message: error.message })));
        });
      });
    }
    button.type = "button";
    (li.querySelector(".gd-meta") || li).appendChild(button);
  }

  function openDialog(li, message) {
    if (!dialog) return;
    target = { li: li, message: message };
    form.reset();
    var quote = dialog.querySelector("[data-flag-quote]");
    var text = li.querySelector(".gd-msg-text");
    quote.textContent = text ? text.textContent : "";
    dialog.querySelector("[data-flag-error]").hidden = true;
    dialog.showModal();
    form.querySelector("textarea").focus();
  }

  if (form) {
    form.addEventListener("submit", function (event) {
      event.preventDefault();
      if (!target) return;
      var data = new FormData(form);
      var fields = { reason: data.get("reason") || "", correction: data.get("correction") || "", teach_as: data.get("teach_as") || "" };
      var current = target;
      post(root.dataset.flagUrl.replace(PLACEHOLDER, current.message.id), fields).then(function (body) {
        dialog.close();
        var seq = current.message.seq;
        (state.flags[seq] = state.flags[seq] || []).push(body.flag);
        flagLine(current.li, body.flag);
        if (body.proposal) {
          current.li.appendChild(proposed(body.proposal));
        }
      }, function (error) {
        var node = dialog.querySelector("[data-flag-error]");
        node.textContent = error.message;
        node.hidden = false;
      });
    });
    dialog.querySelector("[data-flag-cancel]").addEventListener("click", function () { dialog.close(); });
  }

  function refresh() {
    return fetch(root.dataset.url, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (r) { if (!r.ok) throw new Error(String(r.status)); return r.json(); })
      .then(function (data) {
        state.canAct = !!data.can_act;
        state.messages = {};
        (data.messages || []).forEach(function (m) { state.messages[m.seq] = m; });
        state.flags = {};
        (data.flags || []).forEach(function (f) { (state.flags[f.seq] = state.flags[f.seq] || []).push(f); });
        Array.prototype.forEach.call(thread.querySelectorAll("li[data-seq]"), decorate);
      }).catch(function () { /* the thread still works; buttons come with the next refresh */ });
  }

  // Replies that arrive live: fetch once more when the thread gains a reply we do not know.
  var pending = null;
  new MutationObserver(function () {
    var unknown = Array.prototype.some.call(thread.querySelectorAll("li[data-seq]"), function (li) {
      return !li.dataset.flagsDone && (li.classList.contains("gd-role-assistant") || li.classList.contains("gd-role-staff"));
    });
    if (unknown && !pending) pending = setTimeout(function () { pending = null; refresh(); }, 300);
  }).observe(thread, { childList: true });

  refresh();
})();
