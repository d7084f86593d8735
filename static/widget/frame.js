/*
 * GuideDesk chat frame — runs inside /widget/frame/?key=…, served by GuideDesk, so every API call
 * below is same-origin. No dependencies. Message text only ever goes through textContent.
 *
 * Live updates: server-sent events (…/events) with a polling fallback (…/messages?after=N).
 * The conversation id + visitor token live in localStorage for the client's
 * remember_conversation_hours after the last activity (sessionStorage when that is 0), keyed by
 * widget key and embedding site, so a returning visitor finds the conversation and the staff
 * replies that arrived meanwhile (docs/widget.md "Coming back").
 */
(function () {
  "use strict";

  const root = document.getElementById("gd-chat");
  if (!root) return;

  const KEY = root.getAttribute("data-widget-key") || "";
  const API = root.getAttribute("data-api-base") || "/api/v1/widget/";
  const CLIENT_NAME = root.getAttribute("data-client-name") || "Assistant";
  const MAX_CHARS = parseInt(root.getAttribute("data-max-chars") || "4000", 10);
  const REMEMBER_HOURS = Math.max(0, parseInt(root.getAttribute("data-remember-hours") || "0", 10) || 0);
  const STORE_KEY = "guidedesk:conversation:" + KEY + ":" + embeddingSite();
  const SEEN_REPORT_MS = 300;
  // Loaded in the background by widget.js for a returning visitor (the panel is closed): show
  // nothing as seen and hold no live connection until the panel opens ("guidedesk:open").
  const PRELOADED = new URLSearchParams(window.location.search).get("preload") === "1";
  // The page signs its signed-in customer (docs/widget.md "Identity verification"): widget.js
  // posts the signature once this frame has loaded ("guidedesk:identify"); until then, no
  // stored conversation is resumed — it may be another customer's.
  const IDENTIFIED = new URLSearchParams(window.location.search).get("identified") === "1";
  // How long a message typed before the page's signature arrives waits for it before the
  // conversation starts as an anonymous visitor's (a page that never sends one).
  const IDENTITY_WAIT_MS = 5000;
  const POLL_MS = 3000;
  const SSE_RETRY_MS = 30000;
  const PENDING_TIMEOUT_MS = 120000;

  const els = {
    log: document.getElementById("gd-log"),
    form: document.getElementById("gd-form"),
    input: document.getElementById("gd-input"),
    send: document.getElementById("gd-send"),
    typing: document.getElementById("gd-typing"),
    typingLabel: document.getElementById("gd-typing-label"),
    error: document.getElementById("gd-error"),
    handoff: document.getElementById("gd-handoff"),
    subtitle: document.getElementById("gd-subtitle"),
    close: document.getElementById("gd-close"),
    newChat: document.getElementById("gd-new"),
    contact: document.getElementById("gd-contact"),
    contactEmail: document.getElementById("gd-email"),
    contactSave: document.getElementById("gd-contact-save"),
    contactError: document.getElementById("gd-contact-error"),
    contactDone: document.getElementById("gd-contact-done"),
  };

  // ---------------------------------------------------------------- the widget's words
  // One JSON catalogue per language (static/widget/i18n/<lang>.json). The page comes with the
  // one the server chose (#gd-i18n); the language is chosen here, in this order (docs/widget.md
  // "Languages"): the customer's own messages once the server has told us their language, the
  // shop's data-language, the host page's <html lang>, the browser's languages, the client's
  // default — each only if a catalogue ships for it.
  const RTL = ["ar", "fa", "he", "ur", "yi"];
  const i18n = readI18n();
  const catalogues = {};
  catalogues[i18n.language] = i18n.strings;
  let lang = i18n.language;

  function readI18n() {
    const fallback = { language: "en", strings: {}, urls: {}, explicit: "", page: "", client: "" };
    const el = document.getElementById("gd-i18n");
    try {
      const data = el ? JSON.parse(el.textContent) : null;
      return data && typeof data === "object" ? Object.assign(fallback, data) : fallback;
    } catch (e) { return fallback; }
  }

  function baseLanguage(code) {
    return String(code || "").trim().toLowerCase().replace("_", "-").split("-")[0];
  }

  function shipped(code) {
    return Object.prototype.hasOwnProperty.call(i18n.urls, code);
  }

  function chooseLanguage(conversationLanguage) {
    const browser = navigator.languages && navigator.languages.length
      ? Array.prototype.slice.call(navigator.languages) : [navigator.language];
    const candidates = [conversationLanguage, i18n.explicit, i18n.page].concat(browser, [i18n.client]);
    for (let i = 0; i < candidates.length; i++) {
      const code = baseLanguage(candidates[i]);
      if (code && shipped(code)) return code;
    }
    return i18n.language;
  }

  // "%(name)s" is filled in here; a key a catalogue lacks shows the page's own language's text.
  // A filled-in name or address is a bidi isolate (U+2068…U+2069), so "noa@example.com." keeps
  // its full stop at the end of a Hebrew sentence.
  function t(key, values) {
    const strings = catalogues[lang] || i18n.strings;
    const template = String(strings[key] || i18n.strings[key] || "");
    return template.replace(/%\((\w+)\)s/g, function (whole, name) {
      if (!values || !(name in values)) return whole;
      const value = String(values[name]);
      return /^\d+$/.test(value) ? value : "\u2068" + value + "\u2069";
    });
  }

  function loadCatalogue(code) {
    if (catalogues[code]) return Promise.resolve(catalogues[code]);
    return fetch(i18n.urls[code], { credentials: "omit" })
      .then(function (response) { return response.ok ? response.json() : null; })
      .then(function (strings) {
        if (!strings || typeof strings !== "object") throw new Error("no catalogue");
        catalogues[code] = strings;
        return strings;
      });
  }

  // Switch the whole UI (also mid-conversation); a catalogue that fails to load keeps the
  // current language.
  let wanted = lang;
  function useLanguage(code) {
    code = baseLanguage(code);
    if (!code || !shipped(code) || code === wanted) return Promise.resolve();
    wanted = code;
    return loadCatalogue(code).then(function () {
      if (wanted !== code) return;
      lang = code;
      applyStrings();
    }).catch(function () { wanted = lang; });
  }

  function applyStrings() {
    const html = document.documentElement;
    html.lang = lang;
    html.dir = RTL.indexOf(lang) >= 0 ? "rtl" : "ltr";
    document.title = t("page_title", { name: CLIENT_NAME });
    els.log.setAttribute("aria-label", t("log_label", { name: CLIENT_NAME }));
    document.querySelectorAll("[data-i18n]").forEach(function (el) {
      el.textContent = t(el.getAttribute("data-i18n"));
    });
    document.querySelectorAll("[data-i18n-placeholder]").forEach(function (el) {
      el.setAttribute("placeholder", t(el.getAttribute("data-i18n-placeholder")));
    });
    document.querySelectorAll("[data-i18n-aria-label]").forEach(function (el) {
      el.setAttribute("aria-label", t(el.getAttribute("data-i18n-aria-label")));
    });
    document.querySelectorAll("[data-time]").forEach(function (el) {
      el.textContent = timeLabel(el.getAttribute("data-time"));
    });
    els.subtitle.textContent = t(state.status === "escalated" ? "subtitle_team" : "subtitle_assistant");
    updateTyping();
    if (!els.contact.hidden || !els.contactDone.hidden) updateContact();
    tellLanguage();
  }

  // The loader (widget.js) labels its launcher in the chat's language.
  function tellLanguage() {
    if (window.parent === window) return;
    window.parent.postMessage({
      type: "guidedesk:language",
      language: lang,
      dir: document.documentElement.dir,
      labels: {
        open: t("launcher_open"),
        close: t("launcher_close"),
        unreadOne: t("launcher_unread_one"),
        unreadOther: t("launcher_unread_other"),
      },
    }, "*");
  }

  // Labels that are rendered by script carry their key, so a switch re-renders them too.
  function labelled(tag, className, key) {
    const el = node(tag, className, t(key));
    el.setAttribute("data-i18n", key);
    return el;
  }

  const state = {
    conversation: null, // {id, token, customer?}
    identity: null, // {customer_id, user_hash} | {identity_token}: the page's signature
    grant: "", // the server's grant of that identity, for this page view's conversations
    newChat: false, // "New chat" was pressed: the next conversation is a new one
    lastSeq: 0,
    seen: new Set(),
    status: "open",
    source: null,
    sseBlockedUntil: 0,
    pollTimer: null,
    sending: false,
    localTyping: false,
    remoteTyping: false,
    progressStep: 0, // a deliberative turn's step: "Thinking it through… step 3" (typing event)
    progressMax: 0, // …and the most steps it may take ("of up to 10")
    draft: null, // the reply being written (`delta` events): a bubble the posted reply replaces
    awaitingAfter: 0, // a 202: waiting for a worker's reply to the message with this seq
    lastReplySeq: 0, // the newest reply shown (it may come over the stream before the 202)
    awaitingUntil: 0,
    pinned: true, // the log is scrolled to the end: keep it there as messages arrive
  };

  // ---------------------------------------------------------------- storage (may be blocked)

  // The site the chat is embedded in: a visitor of two sites that share a widget key keeps two
  // conversations (browsers that partition third-party storage do this anyway).
  function embeddingSite() {
    try {
      const ancestors = window.location.ancestorOrigins;
      if (ancestors && ancestors.length) return ancestors[ancestors.length - 1];
    } catch (e) { /* not supported */ }
    try {
      if (document.referrer) return new URL(document.referrer).origin;
    } catch (e) { /* no referrer */ }
    return window.parent === window ? window.location.origin : "";
  }

  // 0 hours: only while the tab is open (sessionStorage); otherwise localStorage with an expiry
  // that every activity pushes forward.
  function conversationStore() {
    return REMEMBER_HOURS > 0 ? window.localStorage : window.sessionStorage;
  }

  function loadConversation() {
    try {
      if (REMEMBER_HOURS === 0) window.localStorage.removeItem(STORE_KEY); // the setting changed
      const store = conversationStore();
      const raw = store.getItem(STORE_KEY);
      const saved = raw ? JSON.parse(raw) : null;
      if (saved && typeof saved.id === "string" && typeof saved.token === "string") {
        if (REMEMBER_HOURS > 0 && !(saved.expires > Date.now())) {
          store.removeItem(STORE_KEY); // expired: start fresh, silently
          return null;
        }
        return saved;
      }
    } catch (e) { /* storage disabled: the chat still works for this page view */ }
    return null;
  }

  function saveConversation(conversation) {
    try {
      const store = conversationStore();
      if (conversation) {
        conversation.expires = Date.now() + REMEMBER_HOURS * 3600 * 1000;
        store.setItem(STORE_KEY, JSON.stringify(conversation));
      } else store.removeItem(STORE_KEY);
    } catch (e) { /* ignore */ }
    updateNewChat();
  }

  // ---------------------------------------------------------------- HTTP

  function api(method, path, body) {
    const headers = { "X-Widget-Key": KEY, Accept: "application/json" };
    if (body !== undefined) headers["Content-Type"] = "application/json";
    if (state.conversation) headers.Authorization = "Bearer " + state.conversation.token;
    return fetch(API + path, {
      method: method,
      headers: headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      credentials: "omit",
      cache: "no-store",
    }).then(function (response) {
      return response.text().then(function (text) {
        let data = null;
        try { data = text ? JSON.parse(text) : null; } catch (e) { data = null; }
        return { ok: response.ok, status: response.status, data: data, headers: response.headers };
      });
    });
  }

  function conversationPath(suffix) {
    return "conversations/" + encodeURIComponent(state.conversation.id) + "/" + suffix;
  }

  function errorText(result) {
    const message = result.data && result.data.error && result.data.error.message;
    if (result.status === 429) {
      const wait = parseInt(result.headers.get("Retry-After") || "", 10);
      return wait > 0 ? t("error_throttled_seconds", { seconds: wait }) : t("error_throttled");
    }
    if (result.status >= 500 || !message) return t("error_server");
    return message;
  }

  function identityBody(extra) {
    const body = state.grant ? { identity_grant: state.grant } : Object.assign({}, state.identity || {});
    return Object.assign(body, extra || {});
  }

  function noteIdentity(result) {
    const identity = (result.data && result.data.identity) || {};
    if (identity.grant) state.grant = identity.grant;
    if ((state.identity || state.grant) && identity.error) {
      // Never trusted without a valid signature: this visitor chats as an anonymous one.
      console.warn(
        "GuideDesk widget: the signed customer identity was not accepted (" + identity.error +
        "); chatting as an anonymous visitor. See docs/widget.md, \"Identity verification\"."
      );
      state.identity = null;
      state.grant = "";
    }
    return identity;
  }

  function adopt(result) {
    const identity = noteIdentity(result);
    state.conversation = {
      id: result.data.id,
      token: result.data.token,
      customer: identity.verified ? identity.customer_id : "",
    };
    saveConversation(state.conversation);
    return state.conversation;
  }

  // Settled once the page's signature has been handled (its customer's open conversation
  // adopted, if any) or IDENTITY_WAIT_MS after load: a message typed before then starts no
  // conversation of its own, which the signature arriving next would throw away.
  let identitySettled = function () {};
  const identityWait = new Promise(function (resolve) {
    identitySettled = resolve;
    if (!IDENTIFIED || window.parent === window) resolve();
    else setTimeout(resolve, IDENTITY_WAIT_MS);
  });

  function ensureConversation() {
    return identityWait.then(startConversation);
  }

  function startConversation() {
    if (state.conversation) return Promise.resolve(state.conversation);
    // The conversation starts in the chat's language (data-language, the page's <html lang>,
    // the browser's…) and keeps it until the customer clearly writes in, or asks for, another.
    const body = identityBody(Object.assign({ language: lang }, state.newChat ? { new: true } : {}));
    return api("POST", "conversations", body).then(function (result) {
      if (!result.ok || !result.data || !result.data.id) throw new Error(errorText(result));
      state.newChat = false;
      adopt(result);
      startLive();
      return state.conversation;
    });
  }

  // ---------------------------------------------------------------- identity

  // The customer id a signature claims (a JWT's `sub`, read without checking it: only to tell
  // whether the stored conversation is this customer's; the server checks the signature).
  function claimedCustomer(identity) {
    if (!identity) return "";
    if (identity.customer_id) return identity.customer_id;
    try {
      const part = identity.identity_token.split(".")[1].replace(/-/g, "+").replace(/_/g, "/");
      const claims = JSON.parse(atob(part + "===".slice((part.length + 3) % 4)));
      return typeof claims.sub === "string" ? claims.sub : "";
    } catch (e) { return ""; }
  }

  function cleanIdentity(raw) {
    if (!raw || typeof raw !== "object") return null;
    const text = function (value, max) {
      return typeof value === "string" && value.length <= max ? value : "";
    };
    if (text(raw.identity_token, 8192)) return { identity_token: raw.identity_token };
    if (text(raw.customer_id, 255) && text(raw.user_hash, 128)) {
      return { customer_id: raw.customer_id, user_hash: raw.user_hash };
    }
    return null;
  }

  // The page told us who its customer is: resume the stored conversation only when it is
  // theirs; otherwise start (or, from another device, resume) theirs on the server.
  function identify(raw) {
    state.identity = cleanIdentity(raw);
    if (!state.identity) {
      console.error(
        "GuideDesk widget: the identity needs customer_id + user_hash, or identity_token; " +
        "chatting as an anonymous visitor."
      );
    }
    const saved = loadConversation();
    const customer = claimedCustomer(state.identity);
    if (saved && customer && saved.customer === customer) {
      state.conversation = saved;
      identitySettled();
      return resumeStored();
    }
    if (saved) saveConversation(null);
    state.conversation = null;
    if (!state.identity) {
      identitySettled();
      return resumeStored();
    }
    // Their open conversation from another device, if any; nothing is created until they write.
    api("POST", "conversations", identityBody({ resume_only: true }))
      .then(function (result) {
        if (!result.ok || !result.data) return;
        if (!result.data.id) return noteIdentity(result);
        adopt(result);
        resumeStored();
      })
      .catch(function () { /* offline: the first message starts the conversation */ })
      .then(function () { identitySettled(); });
  }

  function forgetConversation() {
    stopLive();
    state.conversation = null;
    saveConversation(null);
    state.lastSeq = 0;
    state.seen.clear();
    state.remoteTyping = false;
    state.awaitingUntil = 0;
    seen.reported = 0;
    els.log.querySelectorAll("li[data-seq]").forEach(function (li) { li.remove(); });
    setStatus("open");
    updateTyping();
  }

  // The customer's own language, once the server has detected it, comes first; it is kept
  // with the stored conversation so a reload opens in it.
  function conversationLanguage(code) {
    code = baseLanguage(code);
    if (!code || !state.conversation) return;
    if (state.conversation.language !== code) {
      state.conversation.language = code;
      saveConversation(state.conversation);
    }
    useLanguage(chooseLanguage(code));
  }

  // ---------------------------------------------------------------- rendering

  function node(tag, className, text) {
    const el = document.createElement(tag);
    if (className) el.className = className;
    if (text !== undefined) el.textContent = text;
    return el;
  }

  function token(value) {
    return String(value || "").replace(/[^a-z_]/g, "");
  }

  function nearBottom() {
    return els.log.scrollHeight - els.log.scrollTop - els.log.clientHeight < 80;
  }

  function scrollToEnd(force) {
    if (force || state.pinned) {
      els.log.scrollTop = els.log.scrollHeight;
      state.pinned = true;
    }
  }

  function insertOrdered(li, seq) {
    const items = els.log.querySelectorAll("li[data-seq]");
    for (let i = items.length - 1; i >= 0; i--) {
      if (Number(items[i].getAttribute("data-seq")) < seq) {
        items[i].after(li);
        return;
      }
    }
    const first = items.length ? items[0] : els.log.querySelector("li.gd-pending");
    if (first) first.before(li);
    else els.log.appendChild(li);
  }

  function timeLabel(iso) {
    const when = iso ? new Date(iso) : null;
    if (!when || isNaN(when.getTime())) return "";
    // In the chat's language (its own clock format), not the browser's.
    return when.toLocaleTimeString([lang, "en"], { hour: "2-digit", minute: "2-digit" });
  }

  function dropQuickReplies() {
    els.log.querySelectorAll(".gd-quick").forEach(function (el) { el.remove(); });
  }

  // Quick replies: [{text}] sends that text; [{key, confirm}] sends the button's label in the
  // current language plus, for a confirmation, the structured answer bound to the pending action.
  function quickReplies(choices) {
    const box = node("div", "gd-quick");
    box.setAttribute("role", "group");
    box.setAttribute("aria-label", t("quick_replies"));
    box.setAttribute("data-i18n-aria-label", "quick_replies");
    choices.forEach(function (choice) {
      const button = choice.key ? labelled("button", "", choice.key) : node("button", "", choice.text);
      button.type = "button";
      if (choice.answer) button.setAttribute("data-answer", choice.answer);
      button.addEventListener("click", function () {
        box.querySelectorAll("button").forEach(function (b) { b.disabled = true; });
        const extra = choice.confirm ? { confirm: choice.confirm } : undefined;
        sendText(button.textContent, extra).then(function () { els.input.focus(); });
      });
      box.appendChild(button);
    });
    return box;
  }

  // The confirmation's Yes / No: the answer names the pending action and the digest of its
  // parameters, so it settles that question and nothing else, in any language. A message
  // without both (an older server) gets buttons that send their label only.
  function confirmationReplies(data) {
    const action = data.pending_action;
    const digest = typeof data.digest === "string" ? data.digest : "";
    const bound = (typeof action === "number" || typeof action === "string") && action !== "" && digest;
    return quickReplies(["yes", "no"].map(function (answer) {
      return {
        key: answer,
        answer: answer,
        confirm: bound ? { action: action, digest: digest, answer: answer } : null,
      };
    }));
  }

  function renderMessage(m) {
    if (!m || typeof m.seq !== "number" || state.seen.has(m.seq)) return;
    state.seen.add(m.seq);
    if (m.seq > state.lastSeq) state.lastSeq = m.seq;
    const data = m.data && typeof m.data === "object" ? m.data : {};
    const role = token(m.role);
    const kind = token(m.kind);

    if (role === "user") {
      dropPending(m.text);
      dropQuickReplies();
    } else {
      // A turn posts its replies and finishes in one transaction: a reply means it is done
      // (the stream's own "typing: false" may come half a second later). The reply shown as it
      // was written gives way to the posted one.
      dropDraft();
      state.remoteTyping = false;
      state.localTyping = false; // the reply came over the stream before the send returned
      state.progressStep = 0;
      if (m.seq > state.lastReplySeq) state.lastReplySeq = m.seq;
      if (state.awaitingUntil && m.seq > state.awaitingAfter) state.awaitingUntil = 0;
    }

    const li = node("li", "gd-msg gd-msg--" + role + " gd-kind--" + kind);
    li.setAttribute("data-seq", String(m.seq));

    if (role === "system") {
      li.classList.add("gd-notice");
      li.appendChild(messageText(m.text));
    } else {
      const who = node("span", "gd-who");
      if (role === "user") who.appendChild(labelled("span", "", "who_you"));
      else if (role === "staff") {
        who.appendChild(labelled("span", "", "who_team"));
        who.appendChild(labelled("span", "gd-badge", "badge_staff"));
      } else {
        // The business's name keeps its own direction without turning the label around.
        who.appendChild(node("bdi", "", CLIENT_NAME));
        if (data.offline === true) who.appendChild(labelled("span", "gd-badge gd-badge--offline", "badge_offline"));
      }
      li.appendChild(who);
      // An assistant's or staff reply comes rendered (`html`); anything else is its text.
      li.appendChild(m.html && typeof m.html === "string" ? richText(m.html, m.text) : messageText(m.text));
      if (role !== "user") {
        const sources = sourcesList(data.sources);
        if (sources) li.appendChild(sources);
      }
      const when = timeLabel(m.created_at);
      if (when) {
        const meta = node("span", "gd-meta", when);
        meta.setAttribute("data-time", m.created_at);
        li.appendChild(meta);
      }
      if (kind === "confirmation_request") li.appendChild(confirmationReplies(data));
      if (kind === "clarification" && Array.isArray(data.options)) {
        // A clarifying question: its options are quick replies (sent as the customer's answer).
        const options = data.options.filter(function (o) { return typeof o === "string" && o; });
        if (options.length) {
          li.appendChild(quickReplies(options.slice(0, 4).map(function (o) { return { text: o }; })));
        }
      }
    }
    insertOrdered(li, m.seq);

    if (kind === "handoff") setStatus("escalated");
    else if (kind === "notice" && data.resolved === true) setStatus("open");
    updateTyping();
    scrollToEnd(role === "user");
    afterMessageShown(role);
  }

  // The reply being written: a `delta` event carries {turn, text} — the whole text so far, so
  // a repeated, late or missed one is harmless. It fills one bubble at the end of the log,
  // hidden from screen readers (the posted reply, which replaces it, is announced once).
  function showDraft(data) {
    if (!data || typeof data.text !== "string") return;
    if (!data.text) { // taken back: that text will not be the reply
      dropDraft();
      updateTyping();
      return;
    }
    if (state.status === "escalated") return;
    const turn = String(data.turn);
    let li = state.draft;
    if (!li || li.getAttribute("data-turn") !== turn) {
      dropDraft();
      li = node("li", "gd-msg gd-msg--assistant gd-kind--text gd-draft");
      li.setAttribute("data-turn", turn);
      li.setAttribute("aria-hidden", "true");
      const who = node("span", "gd-who");
      who.appendChild(node("bdi", "", CLIENT_NAME));
      li.appendChild(who);
      li.appendChild(messageText(""));
      els.log.appendChild(li);
      state.draft = li;
    }
    const p = li.querySelector(".gd-text");
    if (p.textContent !== data.text) p.textContent = data.text;
    updateTyping();
    scrollToEnd(false);
  }

  function dropDraft() {
    if (state.draft) {
      state.draft.remove();
      state.draft = null;
    }
  }

  // A message's text runs in its own direction (an English order number in a Hebrew chat).
  function messageText(text) {
    const p = node("p", "gd-text", text);
    p.setAttribute("dir", "auto");
    return p;
  }

  // A reply as the server rendered it (its safe Markdown subset: docs/widget.md, "How replies
  // are shown"). The HTML is parsed in an inert document — nothing in it loads or runs — and
  // rebuilt here element by element: only these tags and attributes, links only to http(s) and
  // mailto addresses, every text as text. Whatever a model or a person wrote, nothing else
  // reaches this page.
  const RICH = { P: [], BR: [], STRONG: [], EM: [], CODE: [], UL: [], OL: ["start"], LI: [], A: ["href"] };
  const RICH_LINK = /^(https?:|mailto:)/i;

  function richText(html, text) {
    let doc = null;
    try { doc = new DOMParser().parseFromString(html, "text/html"); } catch (e) { doc = null; }
    if (!doc || !doc.body) return messageText(text);
    const box = node("div", "gd-text gd-rich");
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
      const tag = child.tagName.toUpperCase();
      const href = tag === "A" ? String(child.getAttribute("href") || "") : "";
      if (!Object.prototype.hasOwnProperty.call(RICH, tag) || (tag === "A" && !RICH_LINK.test(href))) {
        copyRich(child, to); // not ours: its text only
        return;
      }
      const el = document.createElement(tag.toLowerCase());
      if (tag === "A") {
        el.setAttribute("href", href);
        el.setAttribute("target", "_blank");
        el.setAttribute("rel", "noopener noreferrer nofollow");
      } else if (tag === "OL") {
        const start = parseInt(child.getAttribute("start") || "", 10);
        if (start > 0) el.setAttribute("start", String(start));
      }
      copyRich(child, el);
      to.appendChild(el);
    });
  }

  // The help-centre articles a knowledge answer came from (`data.sources`: [{title, url}]),
  // one tap away under it; an article without a public page is its title alone.
  function sourcesList(sources) {
    const items = (Array.isArray(sources) ? sources : []).filter(function (s) {
      return s && typeof s.title === "string" && s.title;
    });
    if (!items.length) return null;
    const box = node("div", "gd-sources");
    box.setAttribute("role", "group");
    box.setAttribute("aria-label", t("sources"));
    box.setAttribute("data-i18n-aria-label", "sources");
    box.appendChild(labelled("span", "gd-sources-label", "sources"));
    const list = node("ul");
    items.slice(0, 5).forEach(function (s) {
      const item = node("li");
      const url = typeof s.url === "string" && /^https?:\/\//i.test(s.url) ? s.url : "";
      const title = node(url ? "a" : "span", "", s.title);
      title.setAttribute("dir", "auto");
      if (url) {
        title.setAttribute("href", url);
        title.setAttribute("target", "_blank");
        title.setAttribute("rel", "noopener noreferrer");
      }
      item.appendChild(title);
      list.appendChild(item);
    });
    box.appendChild(list);
    return box;
  }

  function addPending(text) {
    dropQuickReplies();
    const li = node("li", "gd-msg gd-msg--user gd-pending");
    li.setAttribute("aria-busy", "true");
    const who = node("span", "gd-who");
    who.appendChild(labelled("span", "", "who_you_sending"));
    li.appendChild(who);
    li.appendChild(messageText(text));
    els.log.appendChild(li);
    scrollToEnd(true);
    return li;
  }

  function dropPending(text) {
    const pending = els.log.querySelectorAll("li.gd-pending");
    for (let i = 0; i < pending.length; i++) {
      const p = pending[i].querySelector(".gd-text");
      if (p && p.textContent === String(text).trim()) {
        pending[i].remove();
        return;
      }
    }
  }

  function setStatus(status) {
    if (!status) return;
    state.status = status;
    const human = status === "escalated";
    els.handoff.hidden = !human;
    els.subtitle.textContent = t(human ? "subtitle_team" : "subtitle_assistant");
    updateTyping();
    updateContact();
  }

  function typingText() {
    if (state.status === "escalated") return t("typing_team");
    if (!state.progressStep) return t("typing_assistant");
    // "step 3 of up to 10": the loop may end before its last step, never after it.
    if (state.progressMax > state.progressStep) {
      return t("thinking_step_of", { step: state.progressStep, max: state.progressMax });
    }
    return t("thinking_step", { step: state.progressStep });
  }

  function updateTyping() {
    if (state.awaitingUntil && Date.now() > state.awaitingUntil) state.awaitingUntil = 0;
    const typing = state.localTyping || state.remoteTyping || state.awaitingUntil > 0;
    // While the reply's own words arrive, they say the assistant is writing.
    const show = typing && state.status !== "escalated" && !state.draft;
    const label = typingText();
    if (els.typingLabel.textContent !== label) els.typingLabel.textContent = label;
    if (els.typing.hidden === show) {
      els.typing.hidden = !show;
      if (show) scrollToEnd(false);
    }
  }

  function showError(text) {
    els.error.textContent = text;
    els.error.hidden = false;
  }

  function clearError() {
    els.error.hidden = true;
    els.error.textContent = "";
  }

  // ---------------------------------------------------------------- sending

  function postText(text, extra, retried) {
    const body = Object.assign({ text: text }, extra || {});
    return api("POST", conversationPath("messages"), body).then(function (result) {
      if ((result.status === 404 || result.status === 401) && !retried) {
        // The stored conversation is gone (or its token): start a fresh one, once — without a
        // confirmation meant for the old one.
        forgetConversation();
        return ensureConversation().then(function () { return postText(text, null, true); });
      }
      return result;
    });
  }

  function sendText(raw, extra) {
    const text = String(raw || "").trim();
    if (!text || state.sending) return Promise.resolve();
    if (text.length > MAX_CHARS) {
      showError(t("error_too_long", { max: MAX_CHARS }));
      return Promise.resolve();
    }
    clearError();
    state.sending = true;
    state.localTyping = true;
    els.send.disabled = true;
    const pending = addPending(text);
    updateTyping();

    return ensureConversation()
      .then(function () { return postText(text, extra, false); })
      .then(function (result) {
        if (!result.ok || !result.data || !result.data.message) throw new Error(errorText(result));
        pending.remove();
        // The customer's own language, sticky like the conversation's: the server reports one
        // only on clear evidence (a long clear message, or the customer asking for a language);
        // "" — an order number, a name, "ok", "Ja" — keeps the chat as it is. A server that
        // reports no message language at all: the conversation's (reply) language.
        const sent = result.data.message;
        conversationLanguage("language" in sent ? sent.language : result.data.language);
        renderMessage(result.data.message);
        (result.data.replies || []).forEach(renderMessage);
        if (result.data.status) setStatus(result.data.status);
        // Pending, unless its reply already came over the stream while this request returned.
        if (result.data.pending && state.lastReplySeq < result.data.message.seq) {
          state.awaitingAfter = result.data.message.seq;
          state.awaitingUntil = Date.now() + PENDING_TIMEOUT_MS;
          startLive();
        }
      })
      .catch(function (error) {
        pending.remove();
        // Keep what they typed: put it back in front of anything typed since.
        const now = els.input.value;
        els.input.value = text + (now ? "\n" + now : "");
        resizeInput();
        const offline = error instanceof TypeError; // fetch's network failure
        showError(offline ? t("error_offline") : error.message);
      })
      .then(function () {
        state.sending = false;
        state.localTyping = false;
        els.send.disabled = false;
        updateTyping();
      });
  }

  // ---------------------------------------------------------------- live updates

  function stopLive() {
    if (state.source) {
      state.source.close();
      state.source = null;
    }
    if (state.pollTimer) {
      clearTimeout(state.pollTimer);
      state.pollTimer = null;
    }
  }

  function startLive() {
    if (!state.conversation) return;
    if (window.EventSource && Date.now() >= state.sseBlockedUntil) openStream();
    else schedulePoll(0);
  }

  function openStream() {
    if (state.source) return;
    const c = state.conversation;
    const url = API + "conversations/" + encodeURIComponent(c.id) + "/events?key=" +
      encodeURIComponent(KEY) + "&token=" + encodeURIComponent(c.token) + "&after=" + state.lastSeq;
    const source = new EventSource(url);
    state.source = source;
    source.addEventListener("open", function () {
      if (state.pollTimer) { clearTimeout(state.pollTimer); state.pollTimer = null; }
    });
    source.addEventListener("message", function (event) { renderMessage(parse(event.data)); });
    source.addEventListener("status", function (event) {
      const data = parse(event.data);
      if (data) setStatus(data.status);
    });
    source.addEventListener("typing", function (event) {
      const data = parse(event.data);
      state.remoteTyping = !!(data && data.typing);
      // Deliberative turns add their progress (never their content); older servers send none.
      const progress = data && data.typing && data.progress;
      state.progressStep = progress && typeof progress.step === "number" ? progress.step : 0;
      state.progressMax = progress && typeof progress.max_steps === "number" ? progress.max_steps : 0;
      // The turn ended without posting what it was writing (a person took over): it goes.
      if (!state.remoteTyping) dropDraft();
      updateTyping();
    });
    source.addEventListener("delta", function (event) { showDraft(parse(event.data)); });
    source.addEventListener("error", function () {
      // CONNECTING: the stream ended on schedule or the network blipped; EventSource reconnects
      // by itself (with Last-Event-ID). CLOSED: refused (throttled, gone…): poll instead, and
      // try the stream again later.
      if (source.readyState === EventSource.CLOSED) {
        if (state.source === source) state.source = null;
        state.remoteTyping = false;
        state.sseBlockedUntil = Date.now() + SSE_RETRY_MS;
        schedulePoll(0);
      }
    });
  }

  function parse(text) {
    try { return JSON.parse(text); } catch (e) { return null; }
  }

  function schedulePoll(delay) {
    if (state.pollTimer) clearTimeout(state.pollTimer);
    state.pollTimer = setTimeout(poll, delay);
  }

  function poll() {
    state.pollTimer = null;
    if (!state.conversation || state.source) return;
    fetchNew()
      .catch(function () { /* offline for a moment: try again on the next tick */ })
      .then(function () {
        if (!state.conversation || state.source) return;
        if (window.EventSource && Date.now() >= state.sseBlockedUntil) openStream();
        else schedulePoll(POLL_MS);
      });
  }

  function fetchNew() {
    return api("GET", conversationPath("messages?after=" + state.lastSeq)).then(function (result) {
      if (result.status === 404 || result.status === 401) {
        forgetConversation();
        return null;
      }
      if (!result.ok || !result.data) return null;
      const results = result.data.results || [];
      results.forEach(renderMessage);
      for (let i = results.length - 1; i >= 0; i--) {
        if (results[i] && results[i].role === "user" && results[i].language) {
          conversationLanguage(results[i].language);
          break;
        }
      }
      setStatus(result.data.status);
      state.remoteTyping = !!result.data.typing;
      if (!state.remoteTyping) dropDraft();
      updateTyping();
      if (result.data.contact_confirmed && state.conversation.contact && !state.conversation.contactConfirmed) {
        state.conversation.contactConfirmed = true; // confirmed with the e-mailed link
        saveConversation(state.conversation);
        updateContact();
      }
      return result.data.has_more ? fetchNew() : null;
    });
  }

  // ---------------------------------------------------------------- returning customers

  // "Seen": the widget asks for the messages after the last one it displayed (GET
  // …/messages?after=N), which records N on the conversation. Staff replies still unseen a few
  // minutes after they were sent are e-mailed to the customer's address, if they left one.
  const seen = { reported: 0, timer: null, panelOpen: !PRELOADED };

  function afterMessageShown(role) {
    if (!state.conversation) return;
    if (seen.panelOpen && !document.hidden) state.conversation.shown = state.lastSeq;
    saveConversation(state.conversation); // activity: the stored conversation's expiry moves on
    if (role === "staff") reportSeenSoon();
    tellEmbedder();
  }

  function reportSeenSoon() {
    if (seen.timer || !seen.panelOpen || document.hidden || state.lastSeq <= seen.reported) return;
    seen.timer = setTimeout(function () {
      seen.timer = null;
      if (!state.conversation || document.hidden || state.lastSeq <= seen.reported) return;
      seen.reported = state.lastSeq;
      fetchNew().catch(function () { seen.reported = 0; });
    }, SEEN_REPORT_MS);
  }

  // The embedding page (widget.js) keeps, in its own storage, until when this conversation waits
  // for the team — so a later page view loads the chat in the background — and shows a badge with
  // the replies not shown yet. Only a timestamp and a count leave the frame.
  function tellEmbedder() {
    if (window.parent === window) return;
    const c = state.conversation;
    const waitingUntil = c && REMEMBER_HOURS > 0 && state.status === "escalated" ? c.expires || 0 : 0;
    let unread = 0;
    if (c && !seen.panelOpen) {
      els.log.querySelectorAll("li[data-seq]:not(.gd-msg--user)").forEach(function (li) {
        if (Number(li.getAttribute("data-seq")) > (c.shown || 0)) unread += 1;
      });
    }
    window.parent.postMessage({ type: "guidedesk:waiting", until: waitingUntil }, "*");
    window.parent.postMessage({ type: "guidedesk:unread", count: unread }, "*");
  }

  function panelOpened() {
    if (seen.panelOpen) return;
    seen.panelOpen = true;
    if (state.conversation) {
      state.conversation.shown = state.lastSeq;
      saveConversation(state.conversation);
      if (!state.source && !state.pollTimer) startLive();
    }
    scrollToEnd(true);
    reportSeenSoon();
    tellEmbedder();
  }

  function updateNewChat() {
    els.newChat.hidden = !state.conversation;
  }

  function startNewConversation() {
    // Forget it here only: the old conversation stays as it is for the staff.
    forgetConversation();
    state.newChat = true; // a verified customer's open conversation is not resumed
    clearError();
    els.contactEmail.value = "";
    updateContact();
    els.input.focus();
  }

  function updateContact() {
    const saved = state.conversation && state.conversation.contact;
    const confirmed = !!saved && !!state.conversation.contactConfirmed;
    const asking = state.status === "escalated" && !!state.conversation;
    // Until the address is confirmed the form stays, to correct a typo or send the link again.
    els.contact.hidden = !asking || confirmed;
    els.contactDone.hidden = !asking || !saved;
    if (asking && saved) {
      els.contactDone.textContent = t(confirmed ? "contact_confirmed" : "contact_pending", { email: saved });
    }
    tellEmbedder();
  }

  function saveContact(event) {
    event.preventDefault();
    const email = els.contactEmail.value.trim();
    els.contactError.hidden = true;
    if (!email || !state.conversation) {
      els.contactEmail.focus();
      return;
    }
    els.contactSave.disabled = true;
    api("POST", conversationPath("contact"), { email: email })
      .then(function (result) {
        if (!result.ok || !result.data) {
          const fields = result.data && result.data.error && result.data.error.fields;
          throw new Error((fields && fields.email) || errorText(result));
        }
        state.conversation.contact = result.data.email;
        state.conversation.contactConfirmed = !!result.data.confirmed;
        saveConversation(state.conversation);
        updateContact();
      })
      .catch(function (error) {
        els.contactError.textContent = error instanceof TypeError ? t("error_offline") : error.message;
        els.contactError.hidden = false;
        els.contactEmail.focus();
      })
      .then(function () { els.contactSave.disabled = false; });
  }

  els.newChat.addEventListener("click", startNewConversation);
  els.contact.addEventListener("submit", saveContact);
  document.addEventListener("visibilitychange", reportSeenSoon);

  // ---------------------------------------------------------------- input

  function resizeInput() {
    els.input.style.height = "auto";
    els.input.style.height = Math.min(els.input.scrollHeight + 2, 128) + "px";
  }

  els.form.addEventListener("submit", function (event) {
    event.preventDefault();
    const text = els.input.value;
    // Nothing to send, or the last message is still on its way (Enter submits even while the
    // send button is disabled): what was typed stays in the box, to send once it has gone.
    if (!text.trim() || state.sending) {
      els.input.focus();
      return;
    }
    els.input.value = "";
    resizeInput();
    sendText(text);
    els.input.focus();
  });

  els.input.addEventListener("keydown", function (event) {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      els.form.requestSubmit ? els.form.requestSubmit() : els.send.click();
    }
  });
  els.input.addEventListener("input", resizeInput);
  els.log.addEventListener("scroll", function () { state.pinned = nearBottom(); });
  if (window.ResizeObserver) {
    // The typing line, the error line or a resized window change the log's height.
    new ResizeObserver(function () { scrollToEnd(false); }).observe(els.log);
  }

  // ---------------------------------------------------------------- the embedding page

  const framed = window.parent !== window;
  if (framed) {
    els.close.hidden = false;
    els.close.addEventListener("click", function () {
      window.parent.postMessage({ type: "guidedesk:close" }, "*");
    });
    document.addEventListener("keydown", function (event) {
      if (event.key === "Escape") window.parent.postMessage({ type: "guidedesk:close" }, "*");
    });
    window.addEventListener("message", function (event) {
      if (event.source === window.parent && event.data && event.data.type === "guidedesk:open") {
        panelOpened();
        els.input.focus();
      } else if (event.source === window.parent && event.data && event.data.type === "guidedesk:closed") {
        seen.panelOpen = false; // replies from now on count as unread (the launcher's badge)
        tellEmbedder();
      }
    });
  }

  setInterval(updateTyping, 5000); // lets a 202's wait for a reply time out
  document.addEventListener("visibilitychange", function () {
    if (!document.hidden && state.conversation && !state.source && seen.panelOpen) startLive();
  });

  // ---------------------------------------------------------------- rating (CSAT)
  // When the conversation has gone quiet after an answer (data-idle-seconds on #gd-rating), or
  // when the customer presses "Rate this chat", the widget asks for a 1–5 rating with an optional
  // comment (POST …/rating; docs/outcomes.md). Once rated or dismissed it does not ask again for
  // that conversation. It watches the log instead of hooking into the message code.
  const rating = {
    form: document.getElementById("gd-rating"),
    open: document.getElementById("gd-rate-open"),
    comment: document.getElementById("gd-rating-comment"),
    error: document.getElementById("gd-rating-error"),
    send: document.getElementById("gd-rating-send"),
    dismiss: document.getElementById("gd-rating-dismiss"),
    done: document.getElementById("gd-rating-done"),
    timer: null,
    answered: false,
  };
  rating.idleMs = Math.max(1, parseInt(rating.form.getAttribute("data-idle-seconds") || "120", 10) || 120) * 1000;

  function ratingKey() {
    return state.conversation ? "guidedesk:rating:" + state.conversation.id : "";
  }

  function ratingDecided() {
    try { return !!ratingKey() && !!window.localStorage.getItem(ratingKey()); } catch (e) { return false; }
  }

  function ratingRemember(outcome) {
    try { if (ratingKey()) window.localStorage.setItem(ratingKey(), outcome); } catch (e) { /* ignore */ }
  }

  function ratingUpdate() {
    const offered = rating.answered && !!state.conversation && !ratingDecided();
    rating.open.hidden = !offered || !rating.form.hidden;
    if (!offered) rating.form.hidden = true;
  }

  function ratingShow() {
    clearTimeout(rating.timer);
    if (!rating.answered || !state.conversation || ratingDecided()) return ratingUpdate();
    rating.form.hidden = false;
    rating.done.hidden = true;
    ratingUpdate();
    scrollToEnd(false);
  }

  function ratingStars() {
    rating.error.hidden = true;
    rating.form.querySelectorAll(".gd-star").forEach(function (star, index) {
      const picked = rating.form.querySelector("input[name=score]:checked");
      star.classList.toggle("gd-star--on", !!picked && index < Number(picked.value));
    });
  }

  function ratingSend(event) {
    event.preventDefault();
    const picked = rating.form.querySelector("input[name=score]:checked");
    rating.error.hidden = true;
    if (!picked || !state.conversation) {
      rating.error.textContent = t("rate_pick");
      rating.error.hidden = false;
      return;
    }
    rating.send.disabled = true;
    const body = { score: Number(picked.value), comment: rating.comment.value.trim() };
    api("POST", conversationPath("rating"), body)
      .then(function (result) {
        const code = result.data && result.data.error && result.data.error.code;
        if (!result.ok && code !== "already_rated") throw new Error(errorText(result));
        ratingRemember("rated");
        rating.form.hidden = true;
        rating.done.hidden = false;
        ratingUpdate();
      })
      .catch(function (error) {
        rating.error.textContent = error instanceof TypeError ? t("error_offline") : error.message;
        rating.error.hidden = false;
      })
      .then(function () { rating.send.disabled = false; });
  }

  function ratingOnMessages(mutations) {
    let last = null;
    mutations.forEach(function (mutation) {
      mutation.addedNodes.forEach(function (li) {
        if (li.nodeType === 1 && li.hasAttribute("data-seq")) last = li;
      });
    });
    if (!last) return;
    clearTimeout(rating.timer);
    const fromUs = last.classList.contains("gd-msg--assistant") || last.classList.contains("gd-msg--staff");
    if (fromUs) rating.answered = true;
    if (fromUs && state.status === "open") rating.timer = setTimeout(ratingShow, rating.idleMs);
    ratingUpdate();
  }

  function ratingReset() {
    clearTimeout(rating.timer);
    rating.answered = false;
    rating.form.reset();
    ratingStars();
    rating.form.hidden = true;
    rating.done.hidden = true;
    ratingUpdate();
  }

  new MutationObserver(ratingOnMessages).observe(els.log, { childList: true });
  rating.form.addEventListener("submit", ratingSend);
  rating.form.addEventListener("change", ratingStars);
  rating.open.addEventListener("click", ratingShow);
  rating.dismiss.addEventListener("click", function () {
    ratingRemember("dismissed");
    rating.form.hidden = true;
    ratingUpdate();
  });
  els.newChat.addEventListener("click", ratingReset);
  els.input.addEventListener("input", function () { clearTimeout(rating.timer); });

  // ---------------------------------------------------------------- start

  function resumeStored() {
    updateNewChat();
    if (!state.conversation) return;
    fetchNew()
      .catch(function () { /* the live connection below retries */ })
      .then(function () {
        if (!seen.panelOpen) return tellEmbedder(); // in the background: live once opened
        scrollToEnd(true);
        startLive();
      });
  }

  state.conversation = loadConversation();
  if (state.conversation && state.conversation.customer && !IDENTIFIED) {
    // A verified customer's conversation, and the page no longer signs anyone in (signed out,
    // or another person on this device): never show it to this visitor.
    saveConversation(null);
    state.conversation = null;
  }
  updateNewChat();
  useLanguage(chooseLanguage(state.conversation && state.conversation.language));
  tellLanguage();
  if (IDENTIFIED && framed) {
    state.conversation = null; // until the page's signature says whose it is
    window.addEventListener("message", function (event) {
      if (event.source === window.parent && event.data && event.data.type === "guidedesk:identify") {
        if (state.identityReceived) return; // once per page view
        state.identityReceived = true;
        identify(event.data.identity);
      }
    });
  } else {
    resumeStored();
  }
  // The page's box and button stay disabled until this script can send what is typed.
  els.input.disabled = false;
  els.send.disabled = false;
  if (!framed) els.input.focus();
})();
