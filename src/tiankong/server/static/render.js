// Drawing an answer: the sentence with its blanks, and the ranked lists (per mask, whole words,
// candidate options). Model output only ever enters the page through textContent.

export const MASK = "[MASK]";
export const BLANK = "[BLANK]";
// A blank's marker as the server reads one (core/text.py's marker_variants): any case, ASCII or
// full-width letters, ASCII, full-width or lenticular brackets. BLANK_TYPED: a [BLANK] (the
// request's search options go with it); MARKER_TYPED: a [MASK] or a [BLANK], every one.
const OPENED = "[[【［]\\s*";
const CLOSED = "\\s*[\\]】］]";
const BLANK_LETTERS = "[bＢｂ][lＬｌ][aＡａ][nＮｎ][kＫｋ]";
const MASK_LETTERS = "[mＭｍ][aＡａ][sＳｓ][kＫｋ]";
export const BLANK_TYPED = new RegExp(OPENED + BLANK_LETTERS + CLOSED, "i");
export const MARKER_TYPED = new RegExp(`${OPENED}(?:${MASK_LETTERS}|${BLANK_LETTERS})${CLOSED}`, "gi");
const MASK_RUN_OR_BLANK = /(?:\[MASK\])+|\[BLANK\]/;

export function make(tag, className, text) {
  const element = document.createElement(tag);
  if (className) element.className = className;
  if (text !== undefined) element.textContent = text;
  return element;
}

// Chinese content (the user's text, fills, corpus lines) is marked so, whatever the page's own
// language: under the English page a screen reader read 鸟 and 春眠不觉晓 with an English voice.
export function chinese(element) {
  element.lang = "zh-CN";
  return element;
}

// Scores below a hundredth of a percent are noise to a reader: "<0.01%", not "2.1e-8%".
export function formatPercent(percent) {
  if (percent >= 10) return `${percent.toFixed(1)}%`;
  if (percent >= 0.1) return `${percent.toFixed(2)}%`;
  if (percent >= 0.01) return `${percent.toPrecision(2)}%`;
  return "<0.01%";
}

// The text around the blanks. Candidates fill one blank (a run of [MASK]s counts as one), a
// [BLANK] is one blank of any length, and otherwise every [MASK] is its own blank.
export function splitBlanks(data) {
  if (data.candidates.length) return data.text.split(MASK_RUN_OR_BLANK);
  if (data.text.includes(BLANK)) return data.text.split(BLANK);
  return data.text.split(MASK);
}

function escapeRegExp(text) {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

// What fills each blank in ``filled`` (a sentence from the server), or null if it doesn't fit.
// Adjacent blanks ([MASK][MASK]: nothing between them) are one run, matched as one group and
// shared out one character a blank, as a whole word's tokens are; a run whose text has another
// length (a token of several characters) goes whole to its first blank, so the sentence is
// still the server's.
export function fillsIn(segments, filled) {
  const outer = [segments[0]];
  const runs = [];
  let run = 1;
  for (let i = 1; i < segments.length; i++) {
    if (i < segments.length - 1 && segments[i] === "") {
      run += 1;
      continue;
    }
    runs.push(run);
    run = 1;
    outer.push(segments[i]);
  }
  const pattern = new RegExp(`^${outer.map(escapeRegExp).join("(.*?)")}$`, "s");
  const match = pattern.exec(filled);
  return match ? runs.flatMap((size, i) => shareRun(match[i + 1], size)) : null;
}

function shareRun(text, size) {
  const chars = Array.from(text);
  if (size === 1) return [text];
  return chars.length === size ? chars : [text, ...Array(size - 1).fill("")];
}

export function renderSentence(sentence, segments, fills) {
  sentence.replaceChildren();
  let previous = null;
  segments.forEach((segment, index) => {
    sentence.append(document.createTextNode(segment));
    if (index < fills.length) {
      const blank = make("mark", "blank", fills[index]);
      blank.dataset.testid = `blank-${index}`;
      // a word's [MASK][MASK] is one fill: its characters meet, without the padding between
      // them that drew 吃饭 as 吃 饭
      if (previous && segment === "") {
        previous.classList.add("joins-next");
        blank.classList.add("joins-previous");
      }
      sentence.append(blank);
      previous = blank;
    }
  });
}

// The corpus index's evidence under a row: 出处 (the source line) and how often it occurs.
// The example is corpus text, so it enters the page through textContent like everything else.
// The server sends memory only under real evidence (docs/INDEX.md, the evidence rule), and the
// part of the line that matches the user's text is highlighted.
export function sourceLine(memory, t) {
  const line = make("p", "source");
  line.dataset.testid = "source";
  line.append(make("span", "source-label", `${t("source")} ×${memory.count}`));
  const text = chinese(make("span", "source-text"));
  const at = memory.match ? memory.example.indexOf(memory.match) : -1;
  if (at < 0) {
    text.textContent = memory.example;
  } else {
    const matched = make("mark", "source-match", memory.match);
    matched.dataset.testid = "source-match";
    text.append(
      document.createTextNode(memory.example.slice(0, at)),
      matched,
      document.createTextNode(memory.example.slice(at + memory.match.length)),
    );
  }
  line.append(text);
  return line;
}

// With evidence, the model's own probability is shown beside the combined one.
function memoryDetail(item, t) {
  if (!item.memory || item.model_score === null || item.model_score === undefined) return [];
  return [{ text: `${t("modelOnly")} ${formatPercent(item.model_score * 100)}`, testid: "model-score" }];
}

// One ranked row: rank, label, a probability bar, the score, optional second lines, and the
// index's source line when it has one.
function scoreRow({ rank, label, probability, detail, testid, barTestid, onChoose, memory, t }) {
  const percent = probability * 100;
  const button = make("button", "candidate");
  button.type = "button";
  button.dataset.testid = testid;
  button.setAttribute("aria-pressed", "false");
  button.append(make("span", "rank", String(rank + 1)));
  button.append(chinese(make("span", "token", label)));
  const track = make("span", "bar-track");
  const bar = make("span", "bar");
  if (barTestid) bar.dataset.testid = barTestid;
  bar.style.width = `${Math.min(100, Math.max(percent, 0.5)).toFixed(2)}%`;
  track.append(bar);
  button.append(track);
  const score = make("span", "score");
  score.append(make("span", "main-score", formatPercent(percent)));
  for (const line of detail) {
    const sub = make("span", "sub-score", line.text);
    sub.dataset.testid = line.testid;
    score.append(sub);
  }
  button.append(score);
  button.addEventListener("click", onChoose);
  const item = make("li");
  item.append(button);
  if (memory) item.append(sourceLine(memory, t));
  return item;
}

export function renderMaskLists(container, masks, t, onChoose) {
  container.replaceChildren();
  masks.forEach((candidates, maskIndex) => {
    const group = make("section", "mask-group");
    group.dataset.mask = String(maskIndex);
    const title = make("h3", "group-title", `${t("blank")} ${maskIndex + 1}`);
    title.hidden = masks.length < 2;
    group.append(title);
    const list = make("ol", "candidates");
    candidates.forEach((candidate, rank) => {
      const detail = candidate.raw_score === undefined ? [] : [
        { text: `${t("raw")} ${formatPercent(candidate.raw_score * 100)}`, testid: "raw-score" },
      ];
      detail.push(...memoryDetail(candidate, t));
      const row = scoreRow({
        rank, label: candidate.token, probability: candidate.score, detail,
        testid: "candidate", barTestid: "bar", onChoose: () => onChoose(maskIndex, candidate.token),
        memory: candidate.memory, t,
      });
      row.firstChild.dataset.mask = String(maskIndex);
      row.firstChild.dataset.value = candidate.token;
      list.append(row);
    });
    group.append(list);
    container.append(group);
  });
}

// Whole words: joint probability bars. A [BLANK]'s fills differ in length and are ranked by
// rank_score (joint ** (1 / length ** 0.5)), so there the bar shows it, in the list's order;
// the per-character and joint probabilities, which don't follow that order, are beside it.
// A whole fill's label: its blanks' fills, with … between blanks the text keeps apart
// (``segments``: the text around the blanks, splitBlanks'); [MASK]龙点[MASK] listed 蛟点名's
// fills as 蛟名, one word that is not one (a review).
function fillLabel(sequence, segments) {
  const fills = sequence.fills ?? [];
  if (!segments || fills.length < 2 || fills.length !== segments.length - 1) return sequence.fill;
  return fills.map((fill, i) => (i && segments[i] !== "" ? ` … ${fill}` : fill)).join("");
}

export function renderSequences(list, sequences, lengthsDiffer, t, onChoose, segments = null) {
  list.replaceChildren();
  sequences.forEach((sequence, rank) => {
    const perChar = `${t("perChar")} ${formatPercent(sequence.normalised * 100)}`;
    const [shown, other] = lengthsDiffer
      ? [sequence.rank_score, `${perChar} · ${t("joint")} ${formatPercent(sequence.score * 100)}`]
      : [sequence.score, perChar];
    const detail = [{ text: other, testid: "other-score" }, ...memoryDetail(sequence, t)];
    const row = scoreRow({
      rank, label: fillLabel(sequence, segments), probability: shown, detail,
      testid: "sequence", onChoose: () => onChoose(sequence), memory: sequence.memory, t,
    });
    row.firstChild.dataset.value = sequence.text;
    list.append(row);
  });
}

export function renderOptions(list, candidates, t, onChoose) {
  list.replaceChildren();
  candidates.forEach((candidate, rank) => {
    // the model's own joint probability, named so: a whole fill's 整体 includes the index's
    // evidence where this one never does (the two read alike, a review)
    const detail = [{ text: `${t("modelJoint")} ${formatPercent(candidate.joint * 100)}`, testid: "joint-score" }];
    if (!candidate.in_vocabulary) detail.push({ text: t("unknownChar"), testid: "unknown" });
    // a one-character option's model score is its joint one: 模型整体 1.02% and 模型 1.02% were
    // both shown (a review)
    if (Array.from(candidate.option).length > 1) detail.push(...memoryDetail(candidate, t));
    const row = scoreRow({
      rank, label: candidate.option, probability: candidate.score, detail,
      testid: "option", onChoose: () => onChoose(candidate.text), memory: candidate.memory, t,
    });
    row.firstChild.dataset.value = candidate.text;
    list.append(row);
  });
}
