/*
 * GuideDesk chat widget loader. Paste on your site:
 *
 *   <script src="https://YOUR-GUIDEDESK-HOST/static/widget.js" data-widget-key="wk_…" async></script>
 *
 * It adds a launcher button; the chat itself runs in an iframe served by GuideDesk
 * (/widget/frame/?key=…), so your page never handles the conversation. No dependencies, no
 * inline styles in markup (styles are set through the CSSOM, which a strict CSP allows).
 * Options (data attributes): data-widget-key (required), data-label (launcher text for screen
 * readers, default "Chat with us").
 */
(function () {
  "use strict";

  var script = document.currentScript ||
    document.querySelector('script[data-widget-key][src*="widget.js"]');
  if (!script || window.__guidedeskWidget) return;
  var key = script.getAttribute("data-widget-key");
  if (!key) {
    if (window.console) window.console.warn("GuideDesk widget: data-widget-key is missing.");
    return;
  }
  window.__guidedeskWidget = true;

  var origin = new URL(script.src, window.location.href).origin;
  var frameUrl = origin + "/widget/frame/?key=" + encodeURIComponent(key);
  var label = script.getAttribute("data-label") || "Chat with us";
  var OPEN_FLAG = "guidedesk:open:" + key;
  var ACCENT = "#1f5c45";
  var Z = "2147483000";

  function css(el, styles) {
    for (var name in styles) {
      if (Object.prototype.hasOwnProperty.call(styles, name)) el.style[name] = styles[name];
    }
    return el;
  }

  function svg(path) {
    var ns = "http://www.w3.org/2000/svg";
    var icon = document.createElementNS(ns, "svg");
    icon.setAttribute("viewBox", "0 0 24 24");
    icon.setAttribute("width", "26");
    icon.setAttribute("height", "26");
    icon.setAttribute("aria-hidden", "true");
    icon.setAttribute("focusable", "false");
    var p = document.createElementNS(ns, "path");
    p.setAttribute("d", path);
    p.setAttribute("fill", "currentColor");
    icon.appendChild(p);
    return icon;
  }

  var CHAT_ICON = "M4 4h16a2 2 0 0 1 2 2v10a2 2 0 0 1-2 2H8l-4 4V6a2 2 0 0 1 2-2z";
  var CLOSE_ICON = "M6.4 5 12 10.6 17.6 5 19 6.4 13.4 12l5.6 5.6-1.4 1.4L12 13.4 6.4 19 5 17.6 10.6 12 5 6.4z";

  var container = css(document.createElement("div"), {
    position: "fixed", right: "20px", bottom: "20px", zIndex: Z,
    fontFamily: "system-ui, sans-serif",
  });
  container.id = "guidedesk-widget";

  var panelId = "guidedesk-panel";
  var launcher = css(document.createElement("button"), {
    width: "60px", height: "60px", borderRadius: "50%", border: "0", cursor: "pointer",
    background: ACCENT, color: "#fff", display: "flex", alignItems: "center",
    justifyContent: "center", boxShadow: "0 6px 20px rgba(0,0,0,.25)", padding: "0",
    marginLeft: "auto", outlineOffset: "3px",
  });
  launcher.type = "button";
  launcher.id = "guidedesk-launcher";
  launcher.setAttribute("aria-label", label);
  launcher.setAttribute("aria-expanded", "false");
  launcher.setAttribute("aria-controls", panelId);
  launcher.appendChild(svg(CHAT_ICON));

  var panel = css(document.createElement("div"), {
    position: "fixed", display: "none", background: "#fff", overflow: "hidden",
    boxShadow: "0 12px 40px rgba(0,0,0,.28)", zIndex: Z,
  });
  panel.id = panelId;
  panel.setAttribute("role", "dialog");
  panel.setAttribute("aria-label", label);

  var frame = null;
  var open = false;
  var compact = window.matchMedia ? window.matchMedia("(max-width: 480px)") : null;

  function layout() {
    var small = compact && compact.matches;
    if (small) {
      css(panel, { left: "0", right: "0", top: "0", bottom: "0", width: "100%", height: "100%", borderRadius: "0" });
    } else {
      css(panel, {
        left: "auto", top: "auto", right: "20px", bottom: "92px", width: "380px", height: "600px",
        maxWidth: "calc(100vw - 40px)", maxHeight: "calc(100vh - 120px)", borderRadius: "14px",
      });
    }
    // On a phone the chat covers the page; its own close button closes it.
    launcher.style.display = open && small ? "none" : "flex";
  }

  function ensureFrame(preload) {
    if (frame) return frame;
    frame = css(document.createElement("iframe"), {
      width: "100%", height: "100%", border: "0", display: "block", colorScheme: "normal",
    });
    frame.src = frameUrl + (preload ? "&preload=1" : "");
    frame.title = label;
    frame.setAttribute("allow", "clipboard-write");
    frame.addEventListener("load", function () {
      if (open) focusChat();
    });
    panel.appendChild(frame);
    return frame;
  }

  function focusChat() {
    if (!frame || !frame.contentWindow) return;
    frame.focus();
    frame.contentWindow.postMessage({ type: "guidedesk:open" }, origin);
  }

  function remember(value) {
    try {
      if (value) window.sessionStorage.setItem(OPEN_FLAG, "1");
      else window.sessionStorage.removeItem(OPEN_FLAG);
    } catch (e) { /* storage blocked: nothing to remember */ }
  }

  function setOpen(value, focus) {
    open = value;
    if (open) ensureFrame();
    panel.style.display = open ? "block" : "none";
    launcher.setAttribute("aria-expanded", open ? "true" : "false");
    launcher.setAttribute("aria-label", open ? "Close chat" : label);
    launcher.replaceChildren(svg(open ? CLOSE_ICON : CHAT_ICON));
    if (open) showUnread(0);
    layout();
    remember(open);
    if (focus && open) focusChat();
    if (focus && !open) launcher.focus();
    if (!open && frame && frame.contentWindow) {
      frame.contentWindow.postMessage({ type: "guidedesk:closed" }, origin);
    }
  }

  launcher.addEventListener("click", function () { setOpen(!open, true); });

  window.addEventListener("message", function (event) {
    if (!frame || event.source !== frame.contentWindow || event.origin !== origin) return;
    if (event.data && event.data.type === "guidedesk:close") setOpen(false, true);
    else if (event.data && event.data.type === "guidedesk:waiting") rememberWaiting(event.data.until);
    else if (event.data && event.data.type === "guidedesk:unread") showUnread(event.data.count);
  });

  // ------------------------------------------------------------ a returning visitor
  // While a conversation waits for the business's team, the chat (in its own origin's storage)
  // tells this page until when; a later page view loads it in the background, and it reports
  // how many replies arrived that were not shown — a badge on the launcher (docs/widget.md).
  var WAITING_FLAG = "guidedesk:waiting:" + key;
  var badge = css(document.createElement("span"), {
    position: "absolute", top: "-4px", right: "-4px", minWidth: "22px", height: "22px",
    padding: "0 6px", borderRadius: "11px", background: "#b3261e", color: "#fff",
    font: "700 12px/22px system-ui, sans-serif", textAlign: "center", display: "none",
    pointerEvents: "none", boxShadow: "0 0 0 2px #fff",
  });
  badge.id = "guidedesk-unread";
  badge.setAttribute("aria-hidden", "true");

  function rememberWaiting(until) {
    try {
      if (typeof until === "number" && until > Date.now()) {
        window.localStorage.setItem(WAITING_FLAG, String(until));
      } else window.localStorage.removeItem(WAITING_FLAG);
    } catch (e) { /* storage blocked: no badge on the next visit */ }
  }

  function waiting() {
    try {
      return (parseInt(window.localStorage.getItem(WAITING_FLAG) || "0", 10) || 0) > Date.now();
    } catch (e) { return false; }
  }

  function showUnread(count) {
    var n = open ? 0 : Math.max(0, Math.min(99, parseInt(count, 10) || 0));
    badge.textContent = n ? String(n) : "";
    badge.style.display = n ? "block" : "none";
    if (!open) {
      launcher.setAttribute("aria-label", n ? label + " — " + n + (n === 1 ? " new reply" : " new replies") : label);
    }
  }

  if (compact) {
    if (compact.addEventListener) compact.addEventListener("change", layout);
    else if (compact.addListener) compact.addListener(layout);
  }

  function mount() {
    container.appendChild(panel);
    container.appendChild(launcher);
    container.appendChild(badge);
    document.body.appendChild(container);
    var reopen = false;
    try { reopen = window.sessionStorage.getItem(OPEN_FLAG) === "1"; } catch (e) { reopen = false; }
    setOpen(reopen, false);
    if (!reopen && waiting()) ensureFrame(true); // loads in the background; the badge follows
  }

  if (document.body) mount();
  else document.addEventListener("DOMContentLoaded", mount);
})();
