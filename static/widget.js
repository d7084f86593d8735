/*
 * GuideDesk chat widget loader. Paste on your site:
 *
 *   <script src="https://YOUR-GUIDEDESK-HOST/static/widget.js" data-widget-key="wk_…" async></script>
 *
 * It adds a launcher button; the chat itself runs in an iframe served by GuideDesk
 * (/widget/frame/?key=…), so your page never handles the conversation. No dependencies, no
 * inline styles in markup (styles are set through the CSSOM, which a strict CSP allows).
 * Options (data attributes): data-widget-key (required), data-label (launcher text for screen
 * readers; default: the widget catalogue's "Chat with us" in the chat's language),
 * data-language or data-lang (the chat's language, e.g. "es"; default: the customer's own, then
 * this page's <html lang>, the browser's, the client's — docs/widget.md "Languages").
 * A signed-in customer (docs/widget.md "Identity verification"): data-customer-id +
 * data-user-hash (an HMAC your backend computed), or data-identity-token (a short-lived JWT your
 * backend signed) — or the same as window.GuideDeskIdentity = {customer_id, user_hash} /
 * {identity_token}, set before this script runs. Never computed in the browser.
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
  // The languages with a catalogue in static/widget/i18n/ (a test keeps this list true).
  var SHIPPED = ["en", "es", "fr", "de", "pt", "it", "nl", "he", "ar"];
  var RTL = ["ar", "fa", "he", "ur", "yi"];
  var explicitLanguage = script.getAttribute("data-language") || script.getAttribute("data-lang") || "";
  var pageLanguage = document.documentElement.getAttribute("lang") || "";
  var frameUrl = origin + "/widget/frame/?key=" + encodeURIComponent(key) +
    (explicitLanguage ? "&lang=" + encodeURIComponent(explicitLanguage.slice(0, 16)) : "") +
    (pageLanguage ? "&page_lang=" + encodeURIComponent(pageLanguage.slice(0, 16)) : "");
  var shopLabel = script.getAttribute("data-label") || "";

  // The signed identity of the page's signed-in customer, if any: handed to the chat frame by
  // postMessage once it has loaded (never in its URL, which servers and proxies log).
  function readIdentity() {
    var given = window.GuideDeskIdentity;
    var raw = given && typeof given === "object" ? given : {
      customer_id: script.getAttribute("data-customer-id") || "",
      user_hash: script.getAttribute("data-user-hash") || "",
      identity_token: script.getAttribute("data-identity-token") || "",
    };
    if (raw.identity_token) return { identity_token: String(raw.identity_token) };
    if (raw.customer_id || raw.user_hash) {
      if (!raw.customer_id || !raw.user_hash) {
        if (window.console) {
          window.console.error(
            "GuideDesk widget: a signed identity needs both customer_id and user_hash " +
            "(docs/widget.md, \"Identity verification\"); the visitor stays anonymous."
          );
        }
      }
      return { customer_id: String(raw.customer_id || ""), user_hash: String(raw.user_hash || "") };
    }
    return null;
  }
  var identity = readIdentity();
  if (identity) frameUrl += "&identified=1";
  // English until the catalogue of the chat's language has arrived (or if it cannot).
  var words = {
    open: "Chat with us",
    close: "Close chat",
    unreadOne: "%(label)s — 1 new reply",
    unreadOther: "%(label)s — %(count)s new replies",
  };
  var label = shopLabel || words.open;

  function base(code) {
    return String(code || "").trim().toLowerCase().replace("_", "-").split("-")[0];
  }

  function guessLanguage() {
    var browser = navigator.languages && navigator.languages.length ? navigator.languages : [navigator.language];
    var candidates = [explicitLanguage, pageLanguage].concat(Array.prototype.slice.call(browser));
    for (var i = 0; i < candidates.length; i++) {
      var code = base(candidates[i]);
      if (code && SHIPPED.indexOf(code) >= 0) return code;
    }
    return "en";
  }

  function fill(template, values) {
    return String(template).replace(/%\((\w+)\)s/g, function (whole, name) {
      return name in values ? String(values[name]) : whole;
    });
  }

  // A right-to-left page (or chat language) gets the launcher in the bottom-left corner.
  var pageRtl = (document.documentElement.getAttribute("dir") || "").toLowerCase() === "rtl" ||
    RTL.indexOf(base(explicitLanguage || pageLanguage)) >= 0;
  var SIDE = pageRtl ? "left" : "right";
  var OTHER = pageRtl ? "right" : "left";
  var OPEN_FLAG = "guidedesk:open:" + key;
  var ACCENT = "#1f5c45";
  var Z = "2147483000";

  function css(el, styles) {
    for (var name in styles) {
      if (Object.prototype.hasOwnProperty.call(styles, name)) el.style[name] = styles[name];
    }
    return el;
  }

  function svg(path, mirror) {
    var ns = "http://www.w3.org/2000/svg";
    var icon = document.createElementNS(ns, "svg");
    if (mirror) icon.style.transform = "scaleX(-1)"; // the speech bubble's tail, right to left
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

  var placed = { position: "fixed", bottom: "20px", zIndex: Z, fontFamily: "system-ui, sans-serif" };
  placed[SIDE] = "20px";
  var container = css(document.createElement("div"), placed);
  container.id = "guidedesk-widget";

  var panelId = "guidedesk-panel";
  var launcher = css(document.createElement("button"), {
    width: "60px", height: "60px", borderRadius: "50%", border: "0", cursor: "pointer",
    background: ACCENT, color: "#fff", display: "flex", alignItems: "center",
    justifyContent: "center", boxShadow: "0 6px 20px rgba(0,0,0,.25)", padding: "0",
    outlineOffset: "3px",
  });
  launcher.style[pageRtl ? "marginRight" : "marginLeft"] = "auto";
  launcher.type = "button";
  launcher.id = "guidedesk-launcher";
  launcher.setAttribute("aria-label", label);
  launcher.setAttribute("aria-expanded", "false");
  launcher.setAttribute("aria-controls", panelId);
  launcher.appendChild(svg(CHAT_ICON, pageRtl));

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
      var box = {
        top: "auto", bottom: "92px", width: "380px", height: "600px",
        maxWidth: "calc(100vw - 40px)", maxHeight: "calc(100vh - 120px)", borderRadius: "14px",
      };
      box[SIDE] = "20px";
      box[OTHER] = "auto";
      css(panel, box);
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
      if (identity && frame.contentWindow) {
        frame.contentWindow.postMessage({ type: "guidedesk:identify", identity: identity }, origin);
      }
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
    launcher.setAttribute("aria-label", open ? words.close : label);
    launcher.replaceChildren(open ? svg(CLOSE_ICON) : svg(CHAT_ICON, pageRtl));
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
    else if (event.data && event.data.type === "guidedesk:language") {
      seenFrameWords = true;
      useWords(event.data.labels);
    }
  });

  // The launcher's words in the chat's language: first the loader's own guess (fetched from
  // the same catalogues as the chat's), then whatever the chat reports it switched to.
  function useWords(labels) {
    if (!labels || typeof labels !== "object") return;
    ["open", "close", "unreadOne", "unreadOther"].forEach(function (name) {
      if (typeof labels[name] === "string" && labels[name]) words[name] = labels[name].slice(0, 200);
    });
    label = shopLabel || words.open;
    panel.setAttribute("aria-label", label);
    if (frame) frame.title = label;
    launcher.setAttribute("aria-label", open ? words.close : label);
    showUnread(unread);
  }

  var seenFrameWords = false;
  var guessed = guessLanguage();
  if (guessed !== "en" && window.fetch) {
    window.fetch(new URL("widget/i18n/" + guessed + ".json", script.src).href, { credentials: "omit" })
      .then(function (response) { return response.ok ? response.json() : null; })
      .then(function (catalogue) {
        if (!catalogue || typeof catalogue !== "object" || seenFrameWords) return;
        useWords({
          open: catalogue.launcher_open,
          close: catalogue.launcher_close,
          unreadOne: catalogue.launcher_unread_one,
          unreadOther: catalogue.launcher_unread_other,
        });
      })
      .catch(function () { /* blocked by the page's CSP or offline: English stays */ });
  }

  // ------------------------------------------------------------ a returning visitor
  // While a conversation waits for the business's team, the chat (in its own origin's storage)
  // tells this page until when; a later page view loads it in the background, and it reports
  // how many replies arrived that were not shown — a badge on the launcher (docs/widget.md).
  var WAITING_FLAG = "guidedesk:waiting:" + key;
  var badge = css(document.createElement("span"), {
    position: "absolute", top: "-4px", minWidth: "22px", height: "22px",
    padding: "0 6px", borderRadius: "11px", background: "#b3261e", color: "#fff",
    font: "700 12px/22px system-ui, sans-serif", textAlign: "center", display: "none",
    pointerEvents: "none", boxShadow: "0 0 0 2px #fff",
  });
  badge.style[SIDE] = "-4px";
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

  var unread = 0;
  function showUnread(count) {
    var n = open ? 0 : Math.max(0, Math.min(99, parseInt(count, 10) || 0));
    unread = n;
    badge.textContent = n ? String(n) : "";
    badge.style.display = n ? "block" : "none";
    if (!open) {
      var text = n === 1 ? words.unreadOne : words.unreadOther;
      launcher.setAttribute("aria-label", n ? fill(text, { label: label, count: n }) : label);
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
