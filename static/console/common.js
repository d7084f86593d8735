/* GuideDesk staff console: the small helpers every console script uses (loaded first by
 * templates/console/base.html, so console.js, inbox.js, flags.js, templates.js and
 * playground.js find them as `GDConsole`). Plain JS, no build; text only, never HTML. */
(function () {
  "use strict";

  /* A `say(english, values)` for one script: its words in the page's language, read from the
   * JSON block the template renders with this id (English when a text is missing), with each
   * %(name)s replaced by values[name]. */
  function texts(id) {
    var table = (function () {
      var node = document.getElementById(id);
      try { return node ? JSON.parse(node.textContent) : {}; } catch (e) { return {}; }
    })();
    return function say(english, values) {
      var out = table[english] || english;
      Object.keys(values || {}).forEach(function (key) {
        out = out.split("%(" + key + ")s").join(String(values[key]));
      });
      return out;
    };
  }

  /* A new element with an optional class and text (inserted as text). */
  function el(tag, className, text) {
    var node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  /* At most `max` characters, the last an ellipsis when cut. */
  function truncate(text, max) {
    text = text || "";
    return text.length > max ? text.slice(0, max - 1) + "…" : text;
  }

  window.GDConsole = { texts: texts, el: el, truncate: truncate };
})();
