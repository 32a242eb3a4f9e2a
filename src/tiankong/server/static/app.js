// The tiankong page: plain JavaScript modules, no build step.
// Model output is only ever put into the page with textContent, never as HTML.
import { I18N } from "./i18n.js";
import {
  BLANK, BLANK_TYPED, MASK, chinese, fillsIn, make, renderMaskLists, renderOptions, renderSentence, renderSequences,
  splitBlanks,
} from "./render.js";
import { acceptEdit, renderCheck, utf16Span } from "./check.js";

const EXAMPLES = {
  idiom: { text: "画龙点[MASK]", mode: "single" },
  poem: { text: "春眠不觉晓，处处闻啼[MASK]。", mode: "single" },
  common: { text: "中国的首都是北[MASK]。", mode: "single" },
  // each example answers right with the bundled model and its index (test_page_examples
  // checks it): 手机没电了，赶紧去[MASK][MASK]。 showed 赶紧去赶紧, 太阳从东[MASK]升起。 东北, and
  // 他做事一向[MASK] with four idioms 马马虎虎, the first things a teacher clicked
  wholeWord: { text: "我饿了，我们去[MASK][MASK]吧。", mode: "whole_word" },
  choice: {
    text: "他画的龙栩栩如生，真是画龙点[MASK]。", mode: "candidates",
    candidates: "睛、晴、精、请",
  },
  blank: { text: "今天天气很[BLANK]，我们去公园吧。", mode: "single" },
  check: { text: "欲穷千里目，更上一层搂。画龙点晴。", mode: "check" },
};

// data: the last answer; segments/fills: the sentence around its blanks and what fills them.
const state = {
  lang: "zh", data: null, segments: [], fills: [], busy: false, lastError: null, apiKey: "",
  checked: null, // the last /check answer (校对 mode), with the fixes accepted so far
  again: false, // asked to predict while a request ran
  mode: null, // the mode whose answer may be on screen
  info: null, // the last /info answer (the system panel)
  boxFocused: false, // the text box has had the focus (its caret is the user's)
  note: null, // the note under the text box: its i18n key and what fills it in
  keep: null, // the fills the user chose, for the next answer to the same text (top-k changed)
};
const $ = (id) => document.getElementById(id);
const API_KEY_STORAGE = "tiankong-api-key";

// With API keys on, the server wants one on every API call; it is sent as a bearer token.
function authHeaders() {
  return state.apiKey ? { Authorization: `Bearer ${state.apiKey}` } : {};
}

// An API key is printable ASCII without spaces (the server's rule); anything else can't even go
// in a header, and fetch would throw as if the server were unreachable. Says so when it isn't.
function keyRefused() {
  const refused = !/^[\x21-\x7e]*$/.test($("api-key").value.trim());
  if (refused) showError({ code: "bad_api_key", message: "" });
  return refused;
}

function saveApiKey() {
  if (keyRefused()) return;
  hideError();
  state.apiKey = $("api-key").value.trim();
  try {
    if (state.apiKey) localStorage.setItem(API_KEY_STORAGE, state.apiKey);
    else localStorage.removeItem(API_KEY_STORAGE);
  } catch (_) { /* private mode: kept for this page only */ }
  refreshInfo();
}

// A server warning in the page's language: the Chinese of the ones it knows (i18n.js, by the
// server's English words), else the server's own.
function warningIn(text) {
  return (state.lang === "zh" && I18N.zh.warnings[text]) || text;
}

function t(key) {
  const table = I18N[state.lang];
  return key in table ? table[key] : I18N.zh[key];
}

function applyLanguage() {
  document.documentElement.lang = state.lang === "zh" ? "zh-CN" : "en";
  for (const element of document.querySelectorAll("[data-i18n]")) {
    element.textContent = t(element.dataset.i18n);
  }
  for (const element of document.querySelectorAll("[data-i18n-placeholder]")) {
    element.placeholder = t(element.dataset.i18nPlaceholder);
  }
  $("lang-toggle").textContent = t("langButton");
  $("lang-toggle").lang = state.lang === "zh" ? "en" : "zh-CN"; // 中文 read as Chinese
  document.title = `${t("title")} tiankong`;
  if ($("latency").title) $("latency").title = t("serverTime");
  refreshInfo(); // the system panel's words (线程, 段文本) follow now, not at the next refresh
  showModeHint();
  if (state.lastError) showError(state.lastError);
  if (state.data) renderLists();
  if (state.checked && !$("check-output").hidden) renderChecked(state.checked);
  if (state.note && !$("text-note").hidden) showNote(state.note.key, state.note.values);
}

function setLanguage(lang) {
  state.lang = lang;
  try { localStorage.setItem("tiankong-lang", lang); } catch (_) { /* private mode */ }
  applyLanguage();
}

// --- input ---------------------------------------------------------------------------------

function insertMarker(marker) {
  const box = $("text");
  // a box never focused has its caret at the start: the marker goes at the end there
  const start = state.boxFocused ? box.selectionStart ?? box.value.length : box.value.length;
  const end = state.boxFocused ? box.selectionEnd ?? start : start;
  // as typing does, so that Ctrl+Z takes it back (setRangeText emptied the undo history)
  replaceUndoably(box, start, end, marker, box.value.slice(0, start) + marker + box.value.slice(end));
}

function currentMode() {
  return document.querySelector('input[name="mode"]:checked').value;
}

function setMode(mode) {
  document.querySelector(`input[name="mode"][value="${mode}"]`).checked = true;
  onModeChange();
}

function onModeChange() {
  const mode = currentMode();
  const switched = state.mode !== null && mode !== state.mode;
  if (switched) {
    // an answer of another mode would sit under this mode's button: it goes (and one on its
    // way is dropped when it comes, in predict); so do its error and its note, which spoke
    // of that mode (单字's 没有 [MASK] stayed in 校对, 校对's 2,000 characters in 单字: a review)
    $("output").hidden = true;
    $("check-output").hidden = true;
    hideError();
    $("text-note").hidden = true;
  }
  state.mode = mode;
  // back to 校对: the check of this very text (one that came while another mode was shown, or
  // the one shown before the switch) is shown again, not run again (a review)
  if (switched && mode === "check" && state.checked && state.checked.text === $("text").value) {
    renderChecked(state.checked);
  }
  $("candidates-box").hidden = mode !== "candidates";
  // the candidates are the blank's only fills: constraints don't apply there (a 400 if sent),
  // and nor do the search's options, which the request leaves out (they looked usable: a review)
  for (const id of ["preset", "allowed", "exclude", "beam-width", "order", "max-blank"]) {
    $(id).disabled = mode === "candidates";
  }
  // 校对 reads the text as typed: no blanks to insert, no candidate count, no fill options
  // (they were shown and never sent), a label and a button that say so
  const checking = mode === "check";
  for (const id of ["insert-mask", "insert-blank"]) $(id).hidden = checking;
  // every candidate given is ranked (the count asked for changed nothing there, a review)
  $("top-k").closest("label").hidden = checking || mode === "candidates";
  document.querySelector('[data-testid="advanced"]').hidden = checking;
  for (const [id, key] of [["text-label", "inputLabel"], ["input-hint", "inputHint"]]) {
    $(id).dataset.i18n = checking ? `${key}Check` : key;
    $(id).textContent = t($(id).dataset.i18n);
  }
  $("predict").dataset.i18n = checking ? "checkRun" : "predict";
  $("predict").textContent = t($("predict").dataset.i18n);
  $("loading").dataset.i18n = checking ? "checkLoading" : "loading"; // it said 预测中… here
  $("loading").textContent = t($("loading").dataset.i18n);
  showModeHint();
}

function showModeHint() {
  // the [BLANK] lengths tried follow the advanced option (the hint said 1 to 4 whatever it was)
  $("mode-hint").textContent = t(`modeHint_${currentMode()}`).replace("{max}", $("max-blank").value);
}

// "一丝不苟、马马虎虎, 半途而废 画蛇添足" -> four options
function splitList(value) {
  return value.split(/[\s,，、;；]+/).filter(Boolean);
}

// The server's rule for candidates, as /info's limits publish it (core/options.py writes it
// once); before /info has answered (or where it needs a key the page lacks) the page checks
// only for none, and the server's own 400 says the rest.
function candidateLimits() {
  const limits = state.info?.limits ?? {};
  return { most: limits.max_candidates, longest: limits.max_option_chars };
}

// The options typed, each once: 睛 睛 was a 400 whose reason only the server's English gave
// (a review), and an option typed twice asks nothing more than once.
function candidateList() {
  return [...new Set(splitList($("candidates").value))];
}

// What the page can tell of the options before sending them, as a note in the page's language
// (the server's 400 says it in English): none, too many, one too long. Null when they pass.
function candidatesNote() {
  const options = candidateList();
  if (!options.length) return { key: "candidatesEmpty" };
  const { most, longest } = candidateLimits();
  if (Number.isInteger(most) && options.length > most) {
    return { key: "candidatesTooMany", values: { max: most, n: options.length } };
  }
  // characters as the server counts them (code points: 𠀀 is one, not two UTF-16 units)
  const long = Number.isInteger(longest)
    ? options.find((option) => [...option].length > longest)
    : undefined;
  if (long) return { key: "candidateTooLong", values: { option: long, max: longest } };
  return null;
}

function requestBody() {
  const mode = currentMode();
  const body = { text: $("text").value, top_k: Number($("top-k").value), mode };
  if (mode === "candidates") {
    body.candidates = candidateList();
    return body; // the constraint fields are disabled in this mode (onModeChange)
  }
  // The search options go only where a search reads them (whole words, a [BLANK]): sent with
  // every request, an option changed once made the server warn on every plain answer after.
  const blank = BLANK_TYPED.test(body.text);
  if (mode === "whole_word" || blank) {
    body.beam_width = Number($("beam-width").value);
    body.order = $("order").value;
  }
  if (blank) body.max_blank_length = Number($("max-blank").value);
  if ($("preset").value) body.preset = $("preset").value;
  const allowed = splitList($("allowed").value);
  const exclude = splitList($("exclude").value);
  if (allowed.length) body.allowed = allowed;
  if (exclude.length) body.exclude = exclude;
  return body;
}

function onKeyDown(event) {
  // Enter predicts; Shift+Enter is a newline; Enter that confirms an IME composition is not ours.
  if (event.key === "Enter" && !event.shiftKey && !event.isComposing && event.keyCode !== 229) {
    event.preventDefault();
    predict();
  }
}

// --- prediction ----------------------------------------------------------------------------

function setBusy(busy) {
  state.busy = busy;
  // not ``disabled``: a disabled button drops the keyboard focus to the page; a press while
  // busy is answered after the request that runs (predict)
  $("predict").setAttribute("aria-disabled", String(busy));
  $("loading").hidden = !busy;
  $("output").setAttribute("aria-busy", String(busy));
  $("check-output").setAttribute("aria-busy", String(busy));
}

// A server that takes a request and never answers (stopped, wedged) must not leave the page
// waiting: its own deadline (--request-timeout, 30 s by default) answers 504 well before this.
// The error's words name the 90 s (i18n.js, no_answer).
const ANSWER_WITHIN_MS = 90000;
// A busy server (503 with Retry-After: its queue full) is asked again after the seconds it
// names, up to BUSY_RETRIES times within the page's own deadline: a class proofreading at
// once got "the server is busy" where a second's wait answered them all. A Retry-After past
// BUSY_WAIT_MAX_S, or none, is shown as the error it is.
const BUSY_RETRIES = 5;
const BUSY_WAIT_MAX_S = 10;

function busyWaitMs(response, code) {
  // a full queue (overloaded) or a replica loading: not a server shutting down, whose wait
  // turned the spinner for 25 s and ended in "can't reach the server" (a review)
  if (response.status !== 503 || !["overloaded", "model_unavailable"].includes(code)) return null;
  const seconds = Number(response.headers.get("Retry-After"));
  if (!Number.isFinite(seconds) || seconds < 0 || seconds > BUSY_WAIT_MAX_S) return null;
  return seconds * 1000;
}

// The error code of a response, read from a copy (its body is read again after the loop).
async function errorCode(response) {
  const data = await response.clone().json().catch(() => null);
  return data && data.error ? data.error.code : null;
}

function pause(ms, signal) {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener("abort", () => { clearTimeout(timer); resolve(); }, { once: true });
  });
}

async function predict() {
  if (state.busy) {
    state.again = true; // asked again while a request runs: run once more after it, not dropped
    return;
  }
  state.again = false;
  const keep = state.keep; // for this request's answer, not for one already on its way
  state.keep = null;
  if (keyRefused()) {
    $("api-key").focus();
    return;
  }
  const refused = currentMode() === "candidates" ? candidatesNote() : null;
  if (refused) {
    // said here, in the page's language: the server's 400 read "candidates is an empty list
    // ... or leave it out", in English, of a box this mode can't leave out (a review)
    hideError(); // an earlier request's
    showNote(refused.key, refused.values);
    $("candidates").focus();
    return;
  }
  hideError();
  $("text-note").hidden = true;
  setBusy(true);
  const mode = currentMode();
  const checking = mode === "check";
  const sent = $("text").value;
  const deadline = new AbortController();
  const timer = setTimeout(() => deadline.abort(), ANSWER_WITHIN_MS);
  try {
    const body = JSON.stringify(checking ? { text: sent } : requestBody());
    let response;
    for (let attempt = 0; ; attempt++) {
      response = await fetch(checking ? "check" : "predict", {
        method: "POST",
        headers: { "Content-Type": "application/json", ...authHeaders() },
        body,
        signal: deadline.signal,
      });
      const code = response.status === 503 ? await errorCode(response) : null;
      const wait = busyWaitMs(response, code);
      if (wait === null || attempt >= BUSY_RETRIES) break;
      await pause(wait, deadline.signal);
      if (deadline.signal.aborted) throw new Error("no answer");
    }
    const data = await response.json().catch(() => null);
    if (deadline.signal.aborted) throw new Error("no answer"); // cut off mid-body
    if (currentMode() !== mode) {
      // the mode changed while it ran: not this mode's answer, and nothing is asked in the
      // mode shown now, as a switch when idle asks nothing (asked again, a text with no [MASK]
      // came back an error no one had asked for: a review); a check is kept, and shown when
      // 校对 is chosen again for the same text
      if (checking && response.ok && isAnswer(data, true) && $("text").value === sent) {
        state.checked = data;
      }
      return;
    }
    if (!response.ok && !isError(data)) {
      // a proxy's 502/504 page, not the API's error: told as a 200 that isn't the API's answer
      // is, with its status (it was 出错了。 HTTP 504, a review)
      showError({ code: "bad_answer", message: `HTTP ${response.status}` });
      return;
    }
    if (!response.ok) {
      // the server's own message (English, by design: one error table) is said to be its own
      const error = { ...data.error, server: true };
      // a 429 says how long to wait (Retry-After): shown in the page's language
      showError({ ...error, retryAfter: Number(response.headers.get("Retry-After")) || null });
      if (response.status === 401) $("api-key").focus();
      return;
    }
    if (!isAnswer(data, checking)) {
      // a 200 that isn't the API's answer (a proxy's or a portal's page, its JSON): not
      // "can't reach the server", which a TypeError in drawing it said
      showError({ code: "bad_answer", message: `HTTP ${response.status}` });
      return;
    }
    // a check answers the text as sent: text typed while it ran would be lost to its fixes,
    // so the answer goes, with the note that says why (the page looked as if nothing ran)
    try {
      if (checking && $("text").value !== sent) {
        $("check-output").hidden = true;
        showNote("checkTextChanged");
      } else if (checking) renderChecked(data);
      else render(data, keep);
    } catch (error) {
      // an answer shaped like the API's with a part missing (a proxy's rewrite, another
      // version): drawing it threw, and the page said it could not reach the server (a review)
      showError({ code: "bad_answer", message: `HTTP ${response.status}: ${error}` });
    }
  } catch (error) {
    // aborted: the server took the connection and never answered
    const late = deadline.signal.aborted;
    // the browser's own words (TypeError: Failed to fetch) are for the console, not the reader
    if (!late) console.warn("tiankong: the request failed:", error);
    showError({ code: late ? "no_answer" : "network", message: "" });
  } finally {
    clearTimeout(timer);
    setBusy(false);
    refreshInfo();
    if (state.again) predict(); // the text or mode changed meanwhile: answer what is shown now
  }
}

// The API's error answer: {"error": {"code", "message", ...}}.
function isError(data) {
  return data !== null && typeof data === "object" && data.error !== null
    && typeof data.error === "object" && typeof data.error.code === "string";
}

// The API's answer, by the lists the page draws: a check's edits, a prediction's masks,
// sequences and candidates.
function isAnswer(data, checking) {
  if (data === null || typeof data !== "object" || Array.isArray(data)) return false;
  if (checking) return typeof data.text === "string" && Array.isArray(data.edits);
  return ["masks", "sequences", "candidates"].every((key) => Array.isArray(data[key]));
}

function showError(error) {
  state.lastError = error;
  const box = $("error");
  box.replaceChildren();
  const known = (error.code === "rate_limited" && error.retryAfter && waitWords(error.retryAfter))
    || (I18N[state.lang].errors || {})[error.code];
  const headline = known || (state.lang === "en" && error.message) || t("fallbackError");
  box.append(make("strong", "", headline));
  if (error.message && error.message !== headline) box.append(errorDetail(error));
  // a 500's id finds its traceback in the server's log: the one thing a user can report
  if (error.error_id) box.append(make("span", "detail", `${t("errorId")}: ${error.error_id}`));
  box.hidden = false;
  $("output").hidden = true;
  $("check-output").hidden = true;
}

// An error's detail: the server's message is English whatever the page's language, marked so,
// and on the Chinese page said to be the server's own words (it read as the page's English).
function errorDetail(error) {
  if (!error.server) return make("span", "detail", error.message);
  const detail = make("span", "detail");
  detail.lang = "en";
  if (state.lang === "zh") detail.append(chinese(make("span", "", t("serverWords"))));
  detail.append(error.message);
  return detail;
}

// "Too many requests" with the wait the server named: seconds, or minutes past two of them.
function waitWords(seconds) {
  const minutes = seconds >= 120 ? Math.ceil(seconds / 60) : null;
  return minutes === null
    ? t("rateLimitedSeconds").replace("{n}", String(seconds))
    : t("rateLimitedMinutes").replace("{n}", String(minutes));
}

// A note under the text box (a check's fixes gone because the text changed), in the page's
// language, until the next request; ``values`` fill its {names} in.
function showNote(key, values = {}) {
  state.note = { key, values };
  const note = $("text-note");
  note.textContent = t(key).replace(/\{(\w+)\}/g, (match, name) => String(values[name] ?? match));
  note.hidden = false;
}

function hideError() {
  state.lastError = null;
  $("error").hidden = true;
}

// --- the answer ----------------------------------------------------------------------------

// 校对: the checked sentence; accepting a fix changes the input box too.
function renderChecked(data) {
  state.checked = data;
  $("check-latency").textContent = `${data.latency_ms.toFixed(1)} ms`;
  const shown = { ...data, warnings: (data.warnings ?? []).map(warningIn) };
  renderCheck($("check-result"), shown, t, (edit, suggestion = edit.suggestion) => {
    if ($("text").value !== state.checked.text) {
      $("check-output").hidden = true; // the text changed since: the fix would overwrite it
      return;
    }
    const [start, end] = utf16Span(state.checked.text, edit);
    const place = state.checked.edits.indexOf(edit);
    renderChecked(acceptEdit(state.checked, edit, suggestion));
    replaceUndoably($("text"), start, end, suggestion, state.checked.text);
    // the list was drawn anew: focus goes to the fix after the one accepted (the first
    // remaining one took it, and a second Enter accepted a fix the user had passed over),
    // or back to the text after the last, without scrolling the page (it jumped to the text
    // box at the top after each accept, and the next fix was focused out of view: a review);
    // the next fix is brought into view only where it is not
    const fixes = document.querySelectorAll('[data-testid="accept-fix"]');
    const next = fixes[place];
    if (next) {
      next.focus({ preventScroll: true });
      next.scrollIntoView({ block: "nearest" });
    } else $("text").focus();
  });
  $("output").hidden = true;
  $("check-output").hidden = false;
}

// Replace a part of a text box the way typing does, so Ctrl+Z takes it back (assigning
// ``value`` empties the browser's undo history); ``whole``: what the box must read after.
function replaceUndoably(box, start, end, text, whole) {
  box.focus({ preventScroll: true });
  box.setSelectionRange(start, end);
  const typed = document.execCommand("insertText", false, text); // the one undoable way
  if (!typed || box.value !== whole) box.value = whole;
}

// ``keep``: the fills the user chose in the answer before, to this text ({text, fills}).
function render(data, keep = null) {
  $("check-output").hidden = true;
  state.data = data;
  state.segments = splitBlanks(data);
  // the user's own choice where the answer still lists it, else the best whole answer when
  // there is one, else each mask's top token
  const tops = data.masks.map((candidates) => candidates[0]?.token ?? "");
  const option = data.candidates[0];
  const sequence = data.sequences[0];
  state.fills = keptFills(data, keep) || (option && fillsIn(state.segments, option.text))
    || (sequence && sequenceFills(sequence)) || tops;
  $("latency").textContent = `${data.latency_ms.toFixed(1)} ms`;
  $("latency").title = t("serverTime");
  $("truncated").hidden = !data.truncated;
  renderSentence($("sentence"), state.segments, state.fills);
  renderLists();
  $("output").hidden = false;
}

// The fills chosen in the answer before (``keep``) where this answer to the same text still
// lists them: as a row of each mask's list, a whole fill or an option. Changing the count
// asked again and put the top answer back: a chosen 莺 went back to 鸟 (a review).
function keptFills(data, keep) {
  if (!keep || keep.text !== data.text || keep.fills.length !== state.segments.length - 1) return null;
  const sentence = state.segments.map((segment, i) => segment + (keep.fills[i] ?? "")).join("");
  const listed = data.sequences.some((whole) => whole.text === sentence)
    || data.candidates.some((candidate) => candidate.text === sentence)
    || keep.fills.every((fill, i) => data.masks[i]?.some((candidate) => candidate.token === fill));
  return listed ? [...keep.fills] : null;
}

function renderLists() {
  const data = state.data;
  const warnings = (data.warnings ?? []).map(warningIn); // drawn again in the other language
  $("warnings").hidden = !warnings.length;
  $("warnings").textContent = warnings.join(" ");
  // per-mask lists belong to [MASK]s; a [BLANK] or a candidate blank is answered above, but
  // for a [BLANK] no whole fill of which kept to the constraints: its position's own list is
  // the answer, as the warning says (it promised a list the page hid, a review)
  const perMask = !data.candidates.length && (!data.text.includes(BLANK) || !data.sequences.length);
  // the note explains the 原始 column of the per-mask lists: not where they aren't shown
  const constrained = data.masks.some((mask) => mask.some((c) => c.raw_score !== undefined));
  $("constraint-note").hidden = !(constrained && perMask);
  $("sequences-box").hidden = !data.sequences.length;
  // a [BLANK]'s fills are ranked by rank_score, not by the joint probability (renderSequences)
  const title = $("sequences-title");
  title.dataset.i18n = data.text.includes(BLANK) ? "blankFillsTitle" : "sequencesTitle";
  title.textContent = t(title.dataset.i18n);
  renderSequences(
    $("sequences"), data.sequences, data.text.includes(BLANK), t, chooseSequence, state.segments,
  );
  $("options-box").hidden = !data.candidates.length;
  renderOptions($("options"), data.candidates, t, chooseSentence);
  // titled where there is more than it above: whole fills, or a [BLANK]'s warning
  $("per-mask-title").hidden = !perMask || (!data.sequences.length && !data.text.includes(BLANK));
  $("results").hidden = !perMask;
  renderMaskLists($("results"), perMask ? data.masks : [], t, chooseToken);
  syncPressed();
}

function chooseToken(maskIndex, token) {
  state.fills[maskIndex] = token;
  renderSentence($("sentence"), state.segments, state.fills);
  syncPressed();
}

// A whole fill's blanks, as the server cut them (its ``fills``: one per [MASK], one for a
// [BLANK]; the sentence alone can't tell 天|天 from |天天 in [MASK]天[MASK]气).
function sequenceFills(sequence) {
  return sequence.fills.length === state.segments.length - 1 ? [...sequence.fills] : null;
}

function chooseSequence(sequence) {
  chooseFills(sequenceFills(sequence));
}

function chooseSentence(text) {
  chooseFills(fillsIn(state.segments, text));
}

function chooseFills(fills) {
  if (!fills) return;
  state.fills = fills;
  renderSentence($("sentence"), state.segments, state.fills);
  syncPressed();
}

// A row is pressed when the sentence shows it: a token in its blank, or a whole filled sentence.
function syncPressed() {
  const sentence = filledSentence();
  for (const button of $("output").querySelectorAll(".candidate")) {
    const pressed = button.dataset.mask === undefined
      ? button.dataset.value === sentence
      : state.fills[Number(button.dataset.mask)] === button.dataset.value;
    button.setAttribute("aria-pressed", String(pressed));
  }
}

function filledSentence() {
  return state.segments.map((segment, i) => segment + (state.fills[i] ?? "")).join("");
}

async function copySentence() {
  const text = filledSentence();
  try {
    await navigator.clipboard.writeText(text);
  } catch (_) { // no clipboard API (plain http on a remote host): the old way
    const scratch = make("textarea");
    const focused = document.activeElement; // the scratch box takes the focus: it comes back
    scratch.value = text;
    document.body.append(scratch);
    scratch.select();
    document.execCommand("copy");
    scratch.remove();
    if (focused instanceof HTMLElement) focused.focus(); // (it fell to the page, a review)
  }
  $("copied").hidden = false;
  setTimeout(() => { $("copied").hidden = true; }, 1500);
}

// --- system panel --------------------------------------------------------------------------

async function refreshInfo() {
  if (state.info) showInfo(state.info); // in the page's language now, whatever the fetch gives
  try {
    const response = await fetch("info", { headers: authHeaders() });
    // the key's hint says so when the server wants a key it wasn't given, before any prediction
    const hint = $("api-key-hint");
    hint.dataset.i18n = response.status === 401 ? "apiKeyNeeded" : "apiKeyHint";
    hint.textContent = t(hint.dataset.i18n);
    if (!response.ok) return;
    state.info = await response.json();
    showInfo(state.info);
  } catch (_) { /* the panel is informational; predictions report their own errors */ }
}

// The system panel from an /info answer; its words (线程, 段文本) in the page's language (they
// stayed in the other one when /info failed after a switch: a review).
function showInfo(info) {
  try {
    $("info-model").textContent = info.model.name ?? "—";
    $("info-model").title = info.model.summary ?? "";
    $("info-engine").textContent = `${info.engine} · ${info.precision} · ${info.threads} ${t("threads")}`;
    $("info-device").textContent = info.device;
    $("info-memory").textContent = `${(info.memory_rss_bytes / 2 ** 20).toFixed(0)} MB`;
    const index = info.index ?? { used: "none" };
    $("info-index").textContent = index.counts
      ? `${index.used} · ${index.counts.passages.toLocaleString()} ${t("passages")}`
      : index.used;
    $("info-index").title = index.reason ?? "";
    $("info-qps").textContent = info.last_minute.qps.toFixed(2);
    const { p50_ms: p50, p95_ms: p95 } = info.last_minute;
    $("info-latency").textContent = p50 === null ? "—" : `${p50.toFixed(1)} / ${p95.toFixed(1)} ms`;
  } catch (_) { /* an /info of another shape: the panel is informational */ }
}

// --- wiring --------------------------------------------------------------------------------

function init() {
  let saved = null;
  try { saved = localStorage.getItem("tiankong-lang"); } catch (_) { /* private mode */ }
  state.lang = saved === "en" ? "en" : "zh";
  try { state.apiKey = localStorage.getItem(API_KEY_STORAGE) || ""; } catch (_) { /* private mode */ }
  $("api-key").value = state.apiKey;
  $("api-key").addEventListener("change", saveApiKey);
  onModeChange();
  applyLanguage();
  $("text").addEventListener("keydown", onKeyDown);
  $("text").addEventListener("focus", () => { state.boxFocused = true; });
  $("max-blank").addEventListener("change", showModeHint);
  // a check answers the text as it was sent: once the text changes, its fixes would overwrite
  // what was typed since, so the answer goes
  $("text").addEventListener("input", () => {
    if (state.checked && $("text").value !== state.checked.text && !$("check-output").hidden) {
      $("check-output").hidden = true;
      showNote("checkTextChanged"); // the fixes went: say why, and what to do
    }
  });
  // the list length follows the selector: answered again when an answer is shown, the
  // candidate chosen in it kept where the new list still has it (keptFills)
  $("top-k").addEventListener("change", () => {
    if (state.data && !$("output").hidden) state.keep = { text: state.data.text, fills: [...state.fills] };
    if (state.busy || !$("output").hidden) predict(); // busy: answered again after this one
  });
  for (const id of ["candidates", "allowed", "exclude"]) $(id).addEventListener("keydown", onKeyDown);
  $("predict").addEventListener("click", predict);
  $("insert-mask").addEventListener("click", () => insertMarker(MASK));
  $("insert-blank").addEventListener("click", () => insertMarker(BLANK));
  $("copy").addEventListener("click", copySentence);
  $("lang-toggle").addEventListener("click", () => setLanguage(state.lang === "zh" ? "en" : "zh"));
  for (const radio of document.querySelectorAll('input[name="mode"]')) {
    radio.addEventListener("change", onModeChange);
  }
  for (const button of document.querySelectorAll(".example")) {
    button.addEventListener("click", () => {
      const example = EXAMPLES[button.dataset.example];
      // undoably: Ctrl+Z brings back what was typed before (assigning value lost it for good)
      replaceUndoably($("text"), 0, $("text").value.length, example.text, example.text);
      if (example.candidates) $("candidates").value = example.candidates;
      // cleared, not shown: constraints left in the folded area made 诗句 answer 莺 with
      // nothing in sight saying why (a review); an example shows what it is an example of.
      // The search's options (beam width, order, [BLANK] length) stay: they rank, not filter
      for (const id of ["preset", "allowed", "exclude"]) $(id).value = "";
      setMode(example.mode);
      $("text").focus();
      predict();
    });
  }
  // Back to the page from another (API 文档): the browser puts the form's controls back, the
  // mode buttons among them, after this module ran; the page was drawn for 单字 under a
  // selected 校对 (a review). Drawn again for what is selected once it is shown.
  window.addEventListener("pageshow", onModeChange);
  setInterval(refreshInfo, 15000); // the first: applyLanguage's, above
}

// Modules run after the document is parsed, like a deferred script.
init();
