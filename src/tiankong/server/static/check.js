// 校对 (proofreading) mode: POST /check, the sentence with each suspect underlined, its
// suggestion and score; one click accepts a fix. Model and corpus text enter through textContent.
import { MARKER_TYPED, chinese, formatPercent, make, sourceLine } from "./render.js";

// The server's offsets count characters (code points); a JS string's indices count UTF-16
// units, two for an emoji or a CJK Extension B character, so the text is sliced as an array.
function characters(text) {
  return Array.from(text);
}

// Draw ``data`` (a /check answer) into ``box``; ``onAccept(edit)`` applies one fix.
export function renderCheck(box, data, t, onAccept) {
  box.replaceChildren();
  const sentence = chinese(make("p", "sentence check-sentence"));
  sentence.dataset.testid = "check-sentence";
  const chars = characters(data.text);
  const cuts = cutPoints(data.text);
  let last = 0;
  for (const edit of data.edits) {
    sentence.append(document.createTextNode(chars.slice(last, edit.start).join("")));
    const suspect = make("mark", "suspect", edit.original);
    suspect.dataset.testid = "suspect";
    suspect.title = `${edit.original} → ${edit.suggestion} (${formatPercent(edit.score * 100)})`;
    sentence.append(suspect);
    last = edit.end;
  }
  sentence.append(document.createTextNode(chars.slice(last).join("")));
  box.append(sentence);
  for (const warning of data.warnings ?? []) {
    const note = make("p", "hint", warning); // e.g. no Chinese character: nothing was checked
    note.dataset.testid = "check-warning";
    box.append(note);
  }
  if (!data.edits.length && !data.accepted && !data.checked) return; // the warning says why
  if (!data.edits.length) {
    // after the last fix is accepted the text is not "found clean": every fix was taken
    const clean = make("p", "hint", t(data.accepted ? "checkAllAccepted" : "checkClean"));
    clean.dataset.testid = "check-clean";
    box.append(clean);
    return;
  }
  const list = make("ol", "candidates");
  list.dataset.testid = "check-edits";
  for (const edit of data.edits) {
    const item = make("li");
    const button = make("button", "candidate check-fix");
    button.type = "button";
    button.dataset.testid = "accept-fix";
    button.append(chinese(make("span", "token", `${edit.original} → ${edit.suggestion}`)));
    const score = make("span", "score");
    score.append(make("span", "main-score", formatPercent(edit.score * 100)));
    score.append(make("span", "sub-score", t(`checkSource_${edit.source}`)));
    button.append(score);
    button.append(contextOf(chars, cuts, edit)); // the row under the fix and its score
    button.title = t("checkAccept");
    // one click, one fix: the list is drawn anew after it, and a double click's second click
    // landed on the next fix, which moved under the pointer (a key press has detail 0)
    button.addEventListener("click", (event) => { if (event.detail <= 1) onAccept(edit); });
    item.append(button);
    if (edit.alternatives?.length) item.append(alternativesOf(edit, t, onAccept));
    if (edit.memory) item.append(sourceLine(edit.memory, t)); // its match highlighted
    list.append(item);
  }
  box.append(list);
}

// The other characters weighed at a fix (the answer's ``alternatives``), each one click away:
// the page showed only the first suggestion, and an editor whose word was another had to type
// it (a review). ``onAccept(edit, suggestion)`` applies the fix with the one chosen.
function alternativesOf(edit, t, onAccept) {
  const line = make("p", "alternatives");
  line.dataset.testid = "fix-alternatives";
  line.append(make("span", "", t("checkAlternatives")));
  for (const other of edit.alternatives) {
    // the character alone: a model's alternative is scored against the written character,
    // so every one read near 100% beside the fix's own (期 100.0% 器 100.0% for 天汽, a
    // review), where the index's are shares of its row; the figure stays in the tooltip
    const choice = chinese(make("button", "link-button alternative", other.suggestion));
    choice.type = "button";
    choice.dataset.testid = "accept-alternative";
    choice.title = `${t("checkAccept")} (${formatPercent(other.score * 100)})`;
    choice.addEventListener("click", (event) => {
      if (event.detail <= 1) onAccept(edit, other.suggestion);
    });
    line.append(choice);
  }
  return line;
}

// The characters around a fix, its own underlined, so that a slip made several times gives
// fixes a reader (and a screen reader, which reads the button's text) can tell apart: every
// button read 「采 → 彩 100.0%」 alike. Line ends show as spaces.
const CONTEXT_CHARS = 6;

// The offsets (in characters, as the server counts them) where ``text`` may be cut for a
// context: between two characters as a reader sees them (an emoji family is one, of five code
// points) and never inside a marker: checking [MASK]守株待免 showed «…SK]守株待免» (a review).
function cutPoints(text) {
  const parts = typeof Intl.Segmenter === "function"
    ? Array.from(new Intl.Segmenter().segment(text), (part) => part.segment)
    : characters(text);
  const cuts = new Set([0]);
  let at = 0;
  for (const part of parts) {
    at += characters(part).length;
    cuts.add(at);
  }
  for (const marker of text.matchAll(MARKER_TYPED)) {
    const start = characters(text.slice(0, marker.index)).length;
    const end = start + characters(marker[0]).length;
    for (let inside = start + 1; inside < end; inside++) cuts.delete(inside);
  }
  return cuts;
}

function contextOf(chars, cuts, edit) {
  const line = chinese(make("span", "fix-context"));
  line.dataset.testid = "fix-context";
  let from = Math.max(0, edit.start - CONTEXT_CHARS);
  let to = Math.min(chars.length, edit.end + CONTEXT_CHARS);
  while (!cuts.has(from)) from -= 1; // widened to the whole marker or character: 0 is a cut
  while (to < chars.length && !cuts.has(to)) to += 1;
  const flat = (part) => part.join("").replace(/\s+/g, " ");
  line.append(document.createTextNode((from > 0 ? "…" : "") + flat(chars.slice(from, edit.start))));
  line.append(make("mark", "suspect", edit.original));
  line.append(document.createTextNode(flat(chars.slice(edit.end, to)) + (to < chars.length ? "…" : "")));
  return line;
}

// Where ``edit`` lies in ``text`` in a JS string's own units (for a text box's selection).
export function utf16Span(text, edit) {
  const chars = characters(text);
  const start = chars.slice(0, edit.start).join("").length;
  return [start, start + chars.slice(edit.start, edit.end).join("").length];
}

// ``data`` with one edit applied (its ``suggestion``, or one of its alternatives): the text
// changes, the other edits keep their offsets (each edit replaces one character with one), and
// the edit leaves the list.
export function acceptEdit(data, edit, suggestion = edit.suggestion) {
  const chars = characters(data.text);
  const text = [...chars.slice(0, edit.start), suggestion, ...chars.slice(edit.end)].join("");
  const edits = data.edits.filter((other) => other !== edit);
  return { ...data, text, edits, accepted: (data.accepted ?? 0) + 1 };
}
