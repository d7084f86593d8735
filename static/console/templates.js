/* GuideDesk console: the reply-template picker (templates/console/_reply_templates.html).
 * "/" at the start of an empty reply box (then type to filter) or Ctrl+K (Cmd+K) anywhere in the
 * reply box opens it; ↑ ↓ choose, Enter inserts, Esc closes. The templates come filled in for
 * this conversation and this staff member from verified data only; a variable without a value
 * stays as {name} and is selected, and the form refuses to send while any {name} is left (the
 * message next to the reply box names it; the server refuses such a reply too). Everything is
 * inserted as text, never HTML. */
(function () {
  "use strict";

  var root = document.querySelector("[data-reply-templates]");
  if (!root) return;
  var form = root.closest("form");
  var box = form && form.querySelector("textarea[name=text]");
  if (!box) return;
  var filter = root.querySelector("[data-template-filter]");
  var list = root.querySelector("[data-template-list]");
  var unfilled = form.querySelector("[data-template-unfilled]");

  var say = GDConsole.texts("gd-templates-texts"); // static/console/common.js

  var templates = null; // loaded once, when the picker first opens
  var shown = [];
  var active = 0;
  var mode = null; // "slash": the query is typed in the reply box after "/"; "key": in the filter
  var caret = 0; // where Ctrl+K was pressed: the template goes there

  function load() {
    if (templates) return Promise.resolve(templates);
    return fetch(root.dataset.url, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (r) { if (!r.ok) throw new Error(String(r.status)); return r.json(); })
      .then(function (data) { templates = data.templates || []; return templates; });
  }

  function matches(t, query) {
    query = query.toLowerCase();
    return !query || t.shortcut.toLowerCase().indexOf(query) !== -1 ||
      t.name.toLowerCase().indexOf(query) !== -1;
  }

  function render(query) {
    list.textContent = "";
    shown = (templates || []).filter(function (t) { return matches(t, query); });
    if (active >= shown.length) active = Math.max(0, shown.length - 1);
    if (!shown.length) {
      var empty = document.createElement("li");
      empty.className = "gd-help";
      empty.textContent = (templates && templates.length)
        ? say("No template matches.")
        : say("No reply templates yet: an admin adds them in the admin, under Reply templates.");
      list.appendChild(empty);
      return;
    }
    shown.forEach(function (t, index) {
      var li = document.createElement("li");
      li.setAttribute("role", "option");
      li.id = "gd-template-" + index;
      li.dataset.shortcut = t.shortcut;
      li.setAttribute("aria-selected", index === active ? "true" : "false");
      li.className = "gd-template" + (index === active ? " gd-template-active" : "");
      var name = document.createElement("strong");
      name.textContent = "/" + t.shortcut + " · " + t.name;
      var preview = document.createElement("div");
      preview.className = "gd-sub";
      preview.textContent = t.text.length > 140 ? t.text.slice(0, 139) + "…" : t.text;
      li.appendChild(name);
      li.appendChild(preview);
      li.addEventListener("mousedown", function (event) {
        event.preventDefault();
        active = index;
        choose();
      });
      list.appendChild(li);
    });
    filter.setAttribute("aria-activedescendant", "gd-template-" + active);
  }

  function query() {
    return mode === "slash" ? box.value.slice(1) : filter.value;
  }

  function open(how) {
    mode = how;
    caret = box.selectionStart || 0;
    root.hidden = false;
    active = 0;
    if (how === "key") { filter.value = ""; filter.focus(); }
    load().then(function () { render(query()); }, function () {
      list.textContent = "";
      var li = document.createElement("li");
      li.className = "gd-errors";
      li.textContent = say("Could not load the reply templates.");
      list.appendChild(li);
    });
  }

  function close(refocus) {
    mode = null;
    root.hidden = true;
    if (refocus) box.focus();
  }

  function move(step) {
    if (!shown.length) return;
    active = (active + step + shown.length) % shown.length;
    render(query());
  }

  function choose() {
    var t = shown[active];
    if (!t) return;
    var before, after;
    if (mode === "slash") { before = ""; after = ""; }
    else { before = box.value.slice(0, caret); after = box.value.slice(caret); }
    box.value = before + t.text + after;
    close(true);
    // The first variable left without a value is selected: staff type over it.
    var missing = (t.missing || []).map(function (name) { return "{" + name + "}"; });
    var at = -1;
    var token = "";
    missing.forEach(function (m) {
      var i = box.value.indexOf(m, before.length);
      if (i !== -1 && (at === -1 || i < at)) { at = i; token = m; }
    });
    if (at !== -1) {
      box.setSelectionRange(at, at + token.length);
    } else {
      var end = before.length + t.text.length;
      box.setSelectionRange(end, end);
    }
    box.dispatchEvent(new Event("input", { bubbles: true }));
    warn(placeholders());
  }

  // {name} left in the reply (not {{ }}, a template's literal braces): these block sending.
  function placeholders() {
    var found = [];
    var re = /(^|[^{])\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}(?!\})/g;
    var m;
    while ((m = re.exec(box.value)) !== null) {
      var token = "{" + m[2] + "}";
      if (found.indexOf(token) === -1) found.push(token);
      re.lastIndex = m.index + m[0].length - 1;
    }
    return found;
  }

  function warn(found) {
    if (!unfilled) return;
    if (!found.length) { unfilled.hidden = true; unfilled.textContent = ""; return; }
    unfilled.textContent = say(
      "Fill in %(names)s before sending: the reply still has a template variable.",
      { names: found.join(", ") });
    unfilled.hidden = false;
  }

  form.addEventListener("submit", function (event) {
    var found = placeholders();
    warn(found);
    if (!found.length) return;
    event.preventDefault();
    if (unfilled) unfilled.dataset.refused = String(Number(unfilled.dataset.refused || 0) + 1);
    var at = box.value.search(/(^|[^{])\{\s*[A-Za-z_][A-Za-z0-9_]*\s*\}(?!\})/);
    if (at !== -1) {
      var start = box.value.indexOf("{", at);
      box.focus();
      box.setSelectionRange(start, box.value.indexOf("}", start) + 1);
    }
  });

  function keys(event) {
    if (!mode) return false;
    if (event.key === "ArrowDown") { move(1); }
    else if (event.key === "ArrowUp") { move(-1); }
    else if (event.key === "Enter" && !event.shiftKey) { choose(); }
    else if (event.key === "Escape") { close(true); }
    else { return false; }
    event.preventDefault();
    return true;
  }

  box.addEventListener("keydown", function (event) {
    if ((event.ctrlKey || event.metaKey) && (event.key === "k" || event.key === "K")) {
      event.preventDefault();
      open("key");
      return;
    }
    keys(event);
  });
  box.addEventListener("input", function () {
    if (unfilled && !unfilled.hidden) warn(placeholders());
    if (box.value.charAt(0) === "/" && !/\s/.test(box.value)) {
      if (mode !== "slash") open("slash");
      else if (templates) { active = 0; render(query()); }
    } else if (mode === "slash") {
      close(false);
    }
  });
  filter.addEventListener("keydown", function (event) {
    if (!keys(event) && (event.ctrlKey || event.metaKey) && event.key === "k") event.preventDefault();
  });
  filter.addEventListener("input", function () { active = 0; if (templates) render(query()); });
  filter.addEventListener("blur", function () {
    setTimeout(function () { if (mode === "key" && document.activeElement !== filter) close(false); }, 150);
  });
})();
