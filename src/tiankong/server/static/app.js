// The tiankong page: plain JavaScript, no build step.
// Model output is only ever put into the page with textContent, never as HTML.
"use strict";

const MASK = "[MASK]";
const EXAMPLES = {
  idiom: "画龙点[MASK]",
  poem: "春眠不觉晓，处处闻啼[MASK]。",
  common: "太阳从东[MASK]升起。",
};

const I18N = {
  zh: {
    title: "填空", tagline: "用 BERT 掩码语言模型补全中文句子里的 [MASK]。",
    inputHeading: "输入", inputLabel: "句子（用 [MASK] 标出要填的空）",
    inputHint: "Enter 预测，Shift+Enter 换行。", examples: "示例：",
    exampleIdiom: "成语", examplePoem: "诗句", exampleCommon: "常识",
    insertMask: "插入 [MASK]", topK: "候选数", predict: "预测", loading: "预测中…",
    answer: "答案", truncated: "句子较长，只用了 [MASK] 附近的一段。", copy: "复制句子",
    copied: "已复制", system: "系统", model: "模型", engine: "引擎", device: "设备",
    memory: "内存", qps: "每秒请求（近 1 分钟）", latencyP: "延迟 p50 / p95", apiDocs: "API 文档",
    threads: "线程", blank: "空", serverTime: "服务器耗时", choose: "填入", langButton: "English",
    errors: {
      no_mask: "句子里没有 [MASK]：请用「插入 [MASK]」标出要填的空。",
      empty_text: "请先输入一句话。",
      too_many_masks: "[MASK] 太多了。",
      masks_do_not_fit: "几个 [MASK] 相隔太远，放不进同一个窗口。",
      text_too_long: "句子太长了。",
      top_k_out_of_range: "候选数超出范围。",
      body_too_large: "请求太大了。",
      invalid_request: "请求格式不对。",
      model_unavailable: "模型还在加载，请稍后再试。",
      network: "无法连接服务器。",
    },
    fallbackError: "出错了。",
  },
  en: {
    title: "Fill in the blank", tagline: "Complete the [MASK]s in Chinese text with a BERT masked language model.",
    inputHeading: "Input", inputLabel: "Sentence (mark each blank with [MASK])",
    inputHint: "Enter predicts, Shift+Enter adds a line.", examples: "Examples:",
    exampleIdiom: "Idiom", examplePoem: "Poem", exampleCommon: "Common sense",
    insertMask: "Insert [MASK]", topK: "Candidates", predict: "Predict", loading: "Predicting…",
    answer: "Answer", truncated: "The text is long; only a window around the [MASK]s was used.",
    copy: "Copy sentence", copied: "Copied", system: "System", model: "Model", engine: "Engine",
    device: "Device", memory: "Memory", qps: "Requests/s (last minute)", latencyP: "Latency p50 / p95",
    apiDocs: "API docs", threads: "threads", blank: "Blank", serverTime: "server time", choose: "Use",
    langButton: "中文",
    errors: { network: "Cannot reach the server." },
    fallbackError: "Something went wrong.",
  },
};

const state = { lang: "zh", segments: [], fills: [], busy: false, lastError: null };
const $ = (id) => document.getElementById(id);

function t(key) {
  const table = I18N[state.lang];
  return key in table ? table[key] : I18N.zh[key];
}

function make(tag, className, text) {
  const element = document.createElement(tag);
  if (className) element.className = className;
  if (text !== undefined) element.textContent = text;
  return element;
}

function applyLanguage() {
  document.documentElement.lang = state.lang === "zh" ? "zh-CN" : "en";
  for (const element of document.querySelectorAll("[data-i18n]")) {
    element.textContent = t(element.dataset.i18n);
  }
  $("lang-toggle").textContent = t("langButton");
  if (state.lastError) showError(state.lastError);
  if (state.segments.length) renderGroupTitles();
}

function setLanguage(lang) {
  state.lang = lang;
  try { localStorage.setItem("tiankong-lang", lang); } catch (_) { /* private mode */ }
  applyLanguage();
}

// --- input ---------------------------------------------------------------------------------

function insertMask() {
  const box = $("text");
  const start = box.selectionStart ?? box.value.length;
  const end = box.selectionEnd ?? start;
  box.setRangeText(MASK, start, end, "end");
  box.focus();
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
  $("predict").disabled = busy;
  $("loading").hidden = !busy;
  $("output").setAttribute("aria-busy", String(busy));
}

async function predict() {
  if (state.busy) return;
  hideError();
  setBusy(true);
  try {
    const response = await fetch("predict", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ text: $("text").value, top_k: Number($("top-k").value) }),
    });
    const data = await response.json().catch(() => null);
    if (!response.ok) {
      showError(data && data.error ? data.error : { code: "http", message: `HTTP ${response.status}` });
      return;
    }
    render(data);
  } catch (error) {
    showError({ code: "network", message: String(error) });
  } finally {
    setBusy(false);
    refreshInfo();
  }
}

function showError(error) {
  state.lastError = error;
  const box = $("error");
  box.replaceChildren();
  const known = (I18N[state.lang].errors || {})[error.code];
  const headline = known || (state.lang === "en" && error.message) || t("fallbackError");
  box.append(make("strong", "", headline));
  if (error.message && error.message !== headline) box.append(make("span", "detail", error.message));
  box.hidden = false;
  $("output").hidden = true;
}

function hideError() {
  state.lastError = null;
  $("error").hidden = true;
}

// --- rendering -----------------------------------------------------------------------------

function render(data) {
  state.segments = data.text.split(MASK);
  state.fills = data.masks.map((candidates) => (candidates.length ? candidates[0].token : ""));
  $("latency").textContent = `${data.latency_ms.toFixed(1)} ms`;
  $("latency").title = t("serverTime");
  $("truncated").hidden = !data.truncated;
  renderSentence();
  renderResults(data.masks);
  $("output").hidden = false;
}

function renderSentence() {
  const sentence = $("sentence");
  sentence.replaceChildren();
  state.segments.forEach((segment, index) => {
    sentence.append(document.createTextNode(segment));
    if (index < state.fills.length) {
      const blank = make("mark", "blank", state.fills[index]);
      blank.dataset.testid = `blank-${index}`;
      sentence.append(blank);
    }
  });
}

function filledSentence() {
  return state.segments.map((segment, i) => segment + (state.fills[i] ?? "")).join("");
}

function renderResults(masks) {
  const results = $("results");
  results.replaceChildren();
  masks.forEach((candidates, maskIndex) => {
    const group = make("section", "mask-group");
    group.dataset.mask = String(maskIndex);
    group.append(make("h3", "group-title"));
    const list = make("ol", "candidates");
    candidates.forEach((candidate, rank) => list.append(candidateItem(candidate, rank, maskIndex)));
    group.append(list);
    results.append(group);
  });
  renderGroupTitles();
}

function renderGroupTitles() {
  const groups = $("results").querySelectorAll(".mask-group");
  for (const group of groups) {
    const title = group.querySelector(".group-title");
    title.textContent = `${t("blank")} ${Number(group.dataset.mask) + 1}`;
    title.hidden = groups.length < 2;
  }
}

function candidateItem(candidate, rank, maskIndex) {
  const percent = candidate.score * 100;
  const button = make("button", "candidate");
  button.type = "button";
  button.dataset.testid = "candidate";
  button.dataset.mask = String(maskIndex);
  button.setAttribute("aria-pressed", String(rank === 0));
  button.append(make("span", "rank", String(rank + 1)));
  button.append(make("span", "token", candidate.token));
  const track = make("span", "bar-track");
  const bar = make("span", "bar");
  bar.dataset.testid = "bar";
  bar.style.width = `${Math.min(100, Math.max(percent, 0.5)).toFixed(2)}%`;
  track.append(bar);
  button.append(track);
  button.append(make("span", "score", formatPercent(percent)));
  button.addEventListener("click", () => choose(maskIndex, candidate.token, button));
  const item = make("li");
  item.append(button);
  return item;
}

function choose(maskIndex, token, button) {
  state.fills[maskIndex] = token;
  renderSentence();
  const group = button.closest(".mask-group");
  for (const other of group.querySelectorAll(".candidate")) {
    other.setAttribute("aria-pressed", String(other === button));
  }
}

function formatPercent(percent) {
  if (percent >= 10) return `${percent.toFixed(1)}%`;
  if (percent >= 0.1) return `${percent.toFixed(2)}%`;
  return `${percent.toPrecision(2)}%`;
}

async function copySentence() {
  const text = filledSentence();
  try {
    await navigator.clipboard.writeText(text);
  } catch (_) { // no clipboard API (plain http on a remote host): the old way
    const scratch = make("textarea");
    scratch.value = text;
    document.body.append(scratch);
    scratch.select();
    document.execCommand("copy");
    scratch.remove();
  }
  $("copied").hidden = false;
  setTimeout(() => { $("copied").hidden = true; }, 1500);
}

// --- system panel --------------------------------------------------------------------------

async function refreshInfo() {
  try {
    const response = await fetch("info");
    if (!response.ok) return;
    const info = await response.json();
    $("info-model").textContent = info.model.name ?? "—";
    $("info-model").title = info.model.summary ?? "";
    $("info-engine").textContent = `${info.engine} · ${info.precision} · ${info.threads} ${t("threads")}`;
    $("info-device").textContent = info.device;
    $("info-memory").textContent = `${(info.memory_rss_bytes / 2 ** 20).toFixed(0)} MB`;
    $("info-qps").textContent = info.last_minute.qps.toFixed(2);
    const { p50_ms: p50, p95_ms: p95 } = info.last_minute;
    $("info-latency").textContent = p50 === null ? "—" : `${p50.toFixed(1)} / ${p95.toFixed(1)} ms`;
  } catch (_) { /* the panel is informational; predictions report their own errors */ }
}

// --- wiring --------------------------------------------------------------------------------

function init() {
  let saved = null;
  try { saved = localStorage.getItem("tiankong-lang"); } catch (_) { /* private mode */ }
  state.lang = saved === "en" ? "en" : "zh";
  applyLanguage();
  $("text").addEventListener("keydown", onKeyDown);
  $("predict").addEventListener("click", predict);
  $("insert-mask").addEventListener("click", insertMask);
  $("copy").addEventListener("click", copySentence);
  $("lang-toggle").addEventListener("click", () => setLanguage(state.lang === "zh" ? "en" : "zh"));
  for (const button of document.querySelectorAll(".example")) {
    button.addEventListener("click", () => {
      $("text").value = EXAMPLES[button.dataset.example];
      $("text").focus();
      predict();
    });
  }
  refreshInfo();
  setInterval(refreshInfo, 15000);
}

document.addEventListener("DOMContentLoaded", init);
