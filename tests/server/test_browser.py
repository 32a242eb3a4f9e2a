"""The web page in a real browser: Playwright driving Debian's chromium (never a downloaded one).

If /usr/bin/chromium is missing these tests fail, they don't skip: scripts/test.sh installs it.
Screenshots of the page with results are saved to test-artifacts/: page.png, page-phone.png, and
page-modes-whole-word.png, page-modes.png (candidates), page-modes-phone.png and page-source.png
(出处 under a candidate the corpus index supports).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser, Locator, Page, expect, sync_playwright
from server_helpers import serve_in_thread

from tiankong import FillMasker, Settings
from tiankong.core.text import TextEncoder
from tiankong.engines.fake import FakeEngine
from tiankong.index import combine
from tiankong.server import create_app

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
HTML_TOKEN = "<img src=x onerror=alert(1)>"
POEM = "春眠不觉晓，处处闻啼[MASK]。"
WHOLE_WORD = "手机没电了，赶紧去[MASK][MASK]。"
IDIOM_CLOZE = "他做事一向[MASK]，从来不出差错。"
IDIOMS = ["一丝不苟", "马马虎虎", "半途而废", "画蛇添足"]


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not CHROMIUM.is_file():
        pytest.fail(
            "Debian's chromium is missing (/usr/bin/chromium): run `apt-get install chromium` "
            "(scripts/test.sh does). The browser test never downloads a browser."
        )
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield launched
        launched.close()


class HtmlTokenEncoder(TextEncoder):
    """Every token reads as an HTML tag: what a hostile or odd vocabulary could return."""

    def token_string(self, token_id: int) -> str:
        return HTML_TOKEN


@pytest.fixture(scope="module")
def html_token_url(tiny_model_dir: Path, tiny_masker: FillMasker) -> Iterator[str]:
    settings = Settings(engine="fake", threads=1, model=str(tiny_model_dir))
    encoder = HtmlTokenEncoder(tiny_masker.encoder.tokenizer, tiny_masker.encoder.limits)
    masker = FillMasker(tiny_masker.model, encoder, FakeEngine(len(encoder.vocab)), settings)
    with serve_in_thread(create_app(settings, masker)) as url:
        yield url


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1000, "height": 1000}, locale="zh-CN")
    context.grant_permissions(["clipboard-read", "clipboard-write"])
    opened = context.new_page()
    problems: list[str] = []
    opened.on("pageerror", lambda error: problems.append(str(error)))
    opened.on(
        "console",
        lambda message: (
            problems.append(message.text)
            # the no-mask test's 400, the API-key test's 401s, the error-id test's 500, the
            # busy server's 503s, the rate limit's 429s, the proxy's 504, the lost connection
            if message.type == "error"
            and not re.search(
                "status of (40[01]|429|50[034])|net::ERR_CONNECTION_REFUSED", message.text
            )
            else None
        ),
    )
    yield opened
    context.close()
    assert problems == [], f"the page logged errors: {problems}"


def api_tokens(base_url: str, text: str, top_k: int) -> list[str]:
    response = httpx.post(f"{base_url}/predict", json={"text": text, "top_k": top_k}, timeout=30)
    return [candidate["token"] for candidate in response.json()["predictions"]]


def api_answer(base_url: str, **body: Any) -> dict[str, Any]:
    response = httpx.post(f"{base_url}/predict", json=body, timeout=30)
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


def choose_mode(page: Page, mode: str) -> None:
    """Click the mode's label, as a user does (the radio itself is visually hidden)."""
    page.locator("label.mode", has=page.get_by_test_id(f"mode-{mode}")).click()
    expect(page.get_by_test_id(f"mode-{mode}")).to_be_checked()


def test_predict_choose_copy_and_errors(page: Page, base_url: str, tiny_model_dir: Path) -> None:
    page.goto(base_url)
    # on a page just opened the box's caret is at its start: the button puts the blank at the
    # end of the example sentence, where a reader expects it (it went before 春)
    page.get_by_test_id("insert-mask").click()
    expect(page.get_by_test_id("input")).to_have_value(POEM + "[MASK]")
    expect(page.get_by_test_id("info-model")).to_have_text(tiny_model_dir.name)
    expect(page.get_by_test_id("info-engine")).to_contain_text("torch")

    # type a sentence, putting the blank in with the [MASK] button at the cursor
    box = page.get_by_test_id("input")
    box.fill("")
    box.press_sequentially("太阳从东")
    page.get_by_test_id("insert-mask").click()
    box.press_sequentially("升起。")
    expect(box).to_have_value("太阳从东[MASK]升起。")
    box.press("Shift+Enter")  # a newline, not a prediction
    expect(box).to_have_value("太阳从东[MASK]升起。\n")
    expect(page.get_by_test_id("output")).to_be_hidden()
    box.press("Backspace")
    box.press("Enter")

    # ranked candidates with probability bars, as the API ranks them
    candidates = page.get_by_test_id("candidate")
    expect(candidates).to_have_count(5)
    expected = api_tokens(base_url, "太阳从东[MASK]升起。", 5)
    assert candidates.locator(".token").all_text_contents() == expected
    bars = page.get_by_test_id("bar")
    expect(bars).to_have_count(5)
    assert all((bar.bounding_box() or {}).get("width", 0) > 0 for bar in bars.all())
    expect(page.get_by_test_id("latency")).to_have_text(re.compile(r"^\d+\.\d ms$"))

    # the sentence shows the top answer in the highlighted blank
    sentence = page.get_by_test_id("sentence")
    expect(sentence).to_have_text(f"太阳从东{expected[0]}升起。")
    expect(page.get_by_test_id("blank-0")).to_have_text(expected[0])

    # clicking a candidate fills it in; a focused candidate works with Enter alone
    candidates.nth(2).click()
    expect(sentence).to_have_text(f"太阳从东{expected[2]}升起。")
    expect(candidates.nth(2)).to_have_attribute("aria-pressed", "true")
    candidates.nth(3).focus()
    page.keyboard.press("Enter")
    expect(sentence).to_have_text(f"太阳从东{expected[3]}升起。")

    page.get_by_test_id("copy").click()
    expect(page.locator("#copied")).to_be_visible()
    assert page.evaluate("navigator.clipboard.readText()") == f"太阳从东{expected[3]}升起。"

    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "page.png"), full_page=True)

    # top-k changes the list length, as soon as it is chosen (it waited for Enter before)
    page.get_by_test_id("top-k").select_option("3")
    expect(candidates).to_have_count(3)

    # a sentence without a mask shows the error, in Chinese first
    box.fill("今天天气很好。")
    box.press("Enter")
    error = page.get_by_test_id("error")
    expect(error).to_be_visible()
    expect(error).to_contain_text("没有 [MASK]")
    expect(error).to_contain_text("The text has no [MASK]")
    expect(page.get_by_test_id("output")).to_be_hidden()

    # an example sentence is one click away, and predicting again clears the error
    page.get_by_test_id("example-idiom").click()
    expect(box).to_have_value("画龙点[MASK]")
    expect(error).to_be_hidden()
    expect(candidates).to_have_count(3)


def test_constraints_are_off_in_candidates_mode(page: Page, base_url: str) -> None:
    """The candidates are the blank's only fills: a preset left from another mode made the
    成语选择 example a 400; the fields are disabled there and not sent."""
    page.goto(base_url)
    page.get_by_test_id("advanced").locator("summary").click()
    page.get_by_test_id("preset").select_option("no_punctuation")
    page.get_by_test_id("example-choice").click()
    expect(page.get_by_test_id("mode-candidates")).to_be_checked()
    expect(page.get_by_test_id("option")).to_have_count(4)
    expect(page.get_by_test_id("error")).to_be_hidden()
    # the search's options too, which the request leaves out there (they looked usable)
    for field in ("preset", "allowed", "exclude", "beam-width", "order", "max-blank"):
        expect(page.get_by_test_id(field)).to_be_disabled()
    # every candidate given is ranked: the count was shown there and changed nothing
    expect(page.get_by_test_id("top-k")).to_be_hidden()
    choose_mode(page, "single")
    expect(page.get_by_test_id("preset")).to_be_enabled()
    expect(page.get_by_test_id("beam-width")).to_be_enabled()
    expect(page.get_by_test_id("top-k")).to_be_visible()


def test_the_single_mode_hint_names_the_blank_lengths_tried(page: Page, base_url: str) -> None:
    """It said 1 to 4 characters whatever the advanced option was."""
    page.goto(base_url)
    hint = page.get_by_test_id("mode-hint")
    expect(hint).to_contain_text("1 到 4 个字")
    page.get_by_test_id("advanced").locator("summary").click()
    page.get_by_test_id("max-blank").select_option("2")
    expect(hint).to_contain_text("1 到 2 个字")


def test_a_prediction_asked_for_while_one_runs_is_answered(page: Page, base_url: str) -> None:
    """A click while a request ran was dropped: the old answer stayed under the new text."""
    slow = {"first": True}

    def delay_the_first(route: Any) -> None:
        if slow.pop("first", False):
            page.wait_for_timeout(1500)
        route.continue_()

    page.goto(base_url)
    page.route("**/predict", delay_the_first)
    box = page.get_by_test_id("input")
    box.fill("太阳从东[MASK]升起。")
    box.press("Enter")
    page.get_by_test_id("example-idiom").click()  # while the first is still on its way
    expect(page.get_by_test_id("sentence")).to_contain_text("画龙点")


def test_the_candidate_count_chosen_during_the_first_answer_holds(
    page: Page, base_url: str
) -> None:
    """The count changed while the first request ran was shown in the selector but not
    answered: the re-ask waited for a shown answer. The predict button keeps the keyboard
    focus while it runs (disabled, it dropped the focus to the page)."""
    slow = {"first": True}

    def delay_the_first(route: Any) -> None:
        if slow.pop("first", False):
            page.wait_for_timeout(1500)
        route.continue_()

    page.goto(base_url)
    page.route("**/predict", delay_the_first)
    page.get_by_test_id("predict").focus()
    page.keyboard.press("Enter")
    expect(page.get_by_test_id("loading")).to_be_visible()
    expect(page.get_by_test_id("predict")).to_be_focused()
    page.get_by_test_id("top-k").select_option("10")
    expect(page.get_by_test_id("candidate")).to_have_count(10)


def test_search_options_are_sent_only_where_a_search_reads_them(page: Page, base_url: str) -> None:
    """Changed once in the advanced options, the beam width, order and [BLANK] length went
    with every request, and every plain answer after came with the server's English warning
    that they were not used."""
    bodies: list[dict[str, Any]] = []
    page.on(
        "request",
        lambda request: (
            bodies.append(request.post_data_json) if request.url.endswith("/predict") else None
        ),
    )
    page.goto(base_url)
    page.get_by_test_id("advanced").locator("summary").click()
    page.get_by_test_id("max-blank").select_option("2")
    page.locator("#order").select_option("confident_first")
    box = page.get_by_test_id("input")
    box.fill(POEM)
    box.press("Enter")
    expect(page.get_by_test_id("candidate")).to_have_count(5)
    expect(page.locator("#warnings")).to_be_hidden()
    box.fill("今天天气很【blank】。")  # a [BLANK] as typed: the server reads this one too
    box.press("Enter")
    expect(page.get_by_test_id("sequence").first).to_be_visible()
    # ranked by the length-adjusted score, which the list shows: not "joint probability"
    expect(page.get_by_test_id("sequences-title")).to_have_text(re.compile("按长度调整"))
    choose_mode(page, "whole_word")
    box.fill(WHOLE_WORD)
    box.press("Enter")
    expect(page.get_by_test_id("sequence")).to_have_count(5)
    expect(page.locator("#warnings")).to_be_hidden()
    expect(page.get_by_test_id("sequences-title")).to_have_text("整词（联合概率）")
    searched = {"beam_width", "order", "max_blank_length"}
    assert [sorted(searched & set(body)) for body in bodies] == [
        [],
        ["beam_width", "max_blank_length", "order"],
        ["beam_width", "order"],
    ]
    assert bodies[1]["max_blank_length"] == 2 and bodies[2]["order"] == "confident_first"


def switch_while_asked(page: Page, mode: str) -> None:
    """Ask (Enter), switch to ``mode`` while the answer is on its way, and wait for it: it
    ends without an error."""
    page.get_by_test_id("input").press("Enter")
    expect(page.get_by_test_id("loading")).to_be_visible()
    choose_mode(page, mode)
    expect(page.get_by_test_id("loading")).to_be_hidden(timeout=15_000)
    expect(page.get_by_test_id("error")).to_be_hidden()


def test_an_answer_for_another_mode_is_not_shown(page: Page, base_url: str) -> None:
    """A prediction whose answer came after the mode was switched to 校对 was drawn under the
    校对 button; switching modes left the other mode's answer on the page. Nothing is asked in
    the mode shown now, as a switch when idle asks nothing: asked again, a check switched to
    单字 sent a /predict no one had asked for, whose text had no [MASK] (a review). A check
    that came meanwhile is shown when 校对 is chosen again for the same text."""
    slow = {"predict": True, "check": True}
    asked: list[str] = []
    page.on(
        "request",
        lambda request: (
            asked.append(request.url.rsplit("/", 1)[-1])
            if request.url.endswith(("/check", "/predict"))
            else None
        ),
    )

    def delay_the_first(route: Any) -> None:
        if slow.pop(route.request.url.rsplit("/", 1)[-1], False):
            page.wait_for_timeout(1500)
        route.continue_()

    page.goto(base_url)
    page.get_by_test_id("example-poem").click()
    expect(page.get_by_test_id("candidate")).to_have_count(5)
    choose_mode(page, "check")
    expect(page.get_by_test_id("output")).to_be_hidden()  # the poem's answer went with its mode
    choose_mode(page, "single")
    page.route("**/predict", delay_the_first)
    page.route("**/check", delay_the_first)
    asked.clear()
    switch_while_asked(page, "check")
    expect(page.get_by_test_id("output")).to_be_hidden()
    expect(page.get_by_test_id("check-output")).to_be_hidden()
    assert asked == ["predict"]
    # the other way: a check that comes after a switch to 单字 asks nothing there, and is
    # there again, not asked again, back in 校对
    page.get_by_test_id("input").fill("画龙点晴")
    switch_while_asked(page, "single")
    expect(page.get_by_test_id("check-output")).to_be_hidden()
    choose_mode(page, "check")
    expect(page.get_by_test_id("check-output")).to_be_visible()
    assert asked == ["predict", "check"]


def test_back_to_the_page_draws_the_mode_the_browser_kept(page: Page, base_url: str) -> None:
    """Back from the API docs, the browser put the 校对 button back checked while the page
    stayed drawn for 单字 (its label, hint and button), and 预测 ran a check (a review)."""
    page.goto(base_url)
    choose_mode(page, "check")
    expect(page.get_by_test_id("predict")).to_have_text("校对")
    page.goto(f"{base_url}/docs")
    page.go_back()
    expect(page.get_by_test_id("mode-check")).to_be_checked()
    expect(page.get_by_test_id("predict")).to_have_text("校对")
    expect(page.get_by_test_id("insert-mask")).to_be_hidden()


def test_a_server_that_never_answers_is_reported(page: Page, base_url: str) -> None:
    """A stopped server (SIGSTOP) left the spinner turning and the button off for good."""
    held: list[Any] = []
    page.clock.install()
    page.goto(base_url)
    page.route("**/predict", lambda route: held.append(route))  # taken, never answered
    page.get_by_test_id("input").press("Enter")
    expect(page.get_by_test_id("loading")).to_be_visible()
    page.clock.fast_forward("01:31")
    error = page.get_by_test_id("error")
    expect(error).to_contain_text("90 秒")
    expect(page.get_by_test_id("loading")).to_be_hidden()
    wait_for_route(page, held)
    assert len(held) == 1


def wait_for_route(page: Page, held: list[Any]) -> None:
    """Until a route handler has taken a request into ``held``: it runs when Playwright next
    dispatches events, and the checks before could all pass first (the fresh clone's run of
    the thirtieth session failed so, at ``held[0]``)."""
    for _ in range(250):
        if held:
            return
        page.wait_for_timeout(20)
    raise AssertionError("no request reached the route in 5 s")


def answering(body: str) -> Any:
    """A route handler (Playwright passes the route alone to a one-argument one) answering
    200 with ``body`` as JSON."""

    def answer(route: Any) -> None:
        route.fulfill(status=200, body=body, content_type="application/json")

    return answer


def html_answer(page: Page, base_url: str, status: int, body: str) -> Locator:
    """The page's error box after /predict answered ``status`` with an HTML ``body`` (a proxy's
    page, not the API's JSON), told as such; /predict is left routed so."""
    page.goto(base_url)
    page.route(
        "**/predict",
        lambda route: route.fulfill(status=status, body=body, content_type="text/html"),
    )
    page.get_by_test_id("input").press("Enter")
    error = page.get_by_test_id("error")
    expect(error).to_contain_text("服务器的回答读不懂")
    return error


def test_answers_that_are_no_api_json_and_500s_are_reported_as_they_are(
    page: Page, base_url: str
) -> None:
    """A 200 whose body isn't the API's JSON (a proxy's page) was "cannot reach the server" with
    a TypeError; a 500's error_id, which finds its traceback in the log, was never shown."""
    error = html_answer(page, base_url, 200, "<html>portal</html>")
    expect(error).not_to_contain_text("无法连接")
    page.unroute("**/predict")
    # JSON, but not the API's answer; the last with its lists but a candidate without a score
    # (drawing it threw, and the page said it could not reach the server: a review)
    partial = json.dumps(
        {"text": "春眠[MASK]", "masks": [[{"token": "鸟"}]], "sequences": [], "candidates": []}
    )
    for body in ('{"ok": true}', "[1, 2]", partial):
        page.get_by_test_id("input").press("Enter")  # a real answer first: the error goes
        expect(page.get_by_test_id("output")).to_be_visible()
        expect(error).to_be_hidden()
        page.route("**/predict", answering(body))
        page.get_by_test_id("input").press("Enter")
        expect(error).to_be_visible()
        expect(error).to_contain_text("服务器的回答读不懂")
        expect(error).not_to_contain_text("无法连接")
        page.unroute("**/predict")
    body = '{"error": {"code": "internal_error", "message": "Internal error.", "error_id": "ab12"}}'
    page.route(
        "**/predict",
        lambda route: route.fulfill(status=500, body=body, content_type="application/json"),
    )
    page.get_by_test_id("input").press("Enter")
    expect(error).to_contain_text("服务器内部出错了")
    expect(error).to_contain_text("错误编号: ab12")


def test_a_busy_server_is_asked_again_after_the_seconds_it_names(page: Page, base_url: str) -> None:
    """A full queue answers 503 with Retry-After: the page showed "the server is busy" where a
    second's wait answered (several people proofreading at once). It asks again after the
    seconds the server names, a few times; a Retry-After too long to wait is shown as the
    error it is."""
    busy = '{"error": {"code": "overloaded", "message": "The server is busy; retry shortly."}}'
    asked: list[str] = []

    def busy_twice(route: Any) -> None:
        asked.append(route.request.post_data or "")
        if len(asked) <= 2:
            route.fulfill(
                status=503,
                body=busy,
                content_type="application/json",
                headers={"Retry-After": "1"},
            )
        else:
            route.continue_()

    page.goto(base_url)
    page.route("**/predict", busy_twice)
    page.get_by_test_id("input").press("Enter")
    expect(page.get_by_test_id("output")).to_be_visible(timeout=15_000)
    expect(page.get_by_test_id("error")).to_be_hidden()
    assert len(asked) == 3 and len(set(asked)) == 1  # the same request, asked again
    page.unroute("**/predict")
    page.route(
        "**/predict",
        lambda route: route.fulfill(
            status=503, body=busy, content_type="application/json", headers={"Retry-After": "60"}
        ),
    )
    page.get_by_test_id("input").press("Enter")
    expect(page.get_by_test_id("error")).to_contain_text("服务器正忙")
    # a server shutting down is said at once, not waited on (its Retry-After turned the spinner
    # for 25 s, then "can't reach the server": a review)
    page.unroute("**/predict")
    asked.clear()
    closing = '{"error": {"code": "shutting_down", "message": "The server is shutting down."}}'

    def shutting_down(route: Any) -> None:
        asked.append(route.request.post_data or "")
        route.fulfill(
            status=503, body=closing, content_type="application/json", headers={"Retry-After": "5"}
        )

    page.route("**/predict", shutting_down)
    page.get_by_test_id("input").press("Enter")
    expect(page.get_by_test_id("error")).to_contain_text("服务器正在关闭", timeout=3_000)
    assert len(asked) == 1


def test_a_words_characters_meet_in_the_sentence(page: Page, base_url: str) -> None:
    """Each character of a whole-word fill is its own highlight, and their padding drew 东夷 as
    东 夷 (a review's find); blanks with text between keep theirs."""
    page.goto(base_url)
    choose_mode(page, "whole_word")
    page.get_by_test_id("input").fill("我们去[MASK][MASK]吧，[MASK]好。")
    page.get_by_test_id("predict").click()
    boxes = [page.get_by_test_id(f"blank-{i}").bounding_box() for i in range(3)]
    assert all(box is not None for box in boxes)
    first, second, third = boxes
    assert first and second and third
    assert abs(first["x"] + first["width"] - second["x"]) < 0.5  # 吃|饭: they touch
    assert third["x"] - (second["x"] + second["width"]) > 2  # 吧， between: apart


def test_examples_and_the_marker_button_can_be_undone(page: Page, base_url: str) -> None:
    """An example replaced what was typed for good, and the [MASK] button emptied the undo
    history: Ctrl+Z brought back neither."""
    page.goto(base_url)
    box = page.get_by_test_id("input")
    box.fill("")
    box.press_sequentially("我写了很久的一句话")
    page.get_by_test_id("insert-mask").click()
    expect(box).to_have_value("我写了很久的一句话[MASK]")
    box.press("Control+z")
    expect(box).to_have_value("我写了很久的一句话")
    page.get_by_test_id("example-idiom").click()
    expect(box).to_have_value("画龙点[MASK]")
    expect(page.get_by_test_id("candidate").first).to_be_visible()
    box.press("Control+z")
    expect(box).to_have_value("我写了很久的一句话")


def test_the_old_answer_is_dimmed_while_another_is_asked_for(page: Page, base_url: str) -> None:
    held: list[Any] = []
    page.goto(base_url)
    page.get_by_test_id("example-poem").click()
    expect(page.get_by_test_id("candidate").first).to_be_visible()
    page.route("**/predict", lambda route: held.append(route))  # taken, not answered yet
    page.get_by_test_id("input").fill("画龙点[MASK]")
    page.get_by_test_id("input").press("Enter")
    output = page.get_by_test_id("output")
    expect(output).to_have_attribute("aria-busy", "true")
    expect(output).to_have_css("opacity", "0.45")
    expect(output).to_have_css("pointer-events", "none")  # its choices can't be clicked now
    wait_for_route(page, held)
    held[0].continue_()
    expect(output).to_have_css("opacity", "1")


def test_whole_word_blanks_are_the_servers_own(page: Page, base_url: str) -> None:
    """In [MASK]天[MASK]气很好。 the fill 天天 reads 天天天气很好。, which the sentence alone splits
    as | 天天 as well as 天 | 天: the page split it the first way, and choosing 夏 for the
    first blank then wrote 夏天天天气很好。 (and copied it). The answer's ``fills`` say."""
    text = "[MASK]天[MASK]气很好。"

    def ambiguous_first(route: Any) -> None:
        answer = route.fetch().json()
        shared = {"score": 0.5, "normalised": 0.7, "model_score": 0.5, "memory": None}
        answer["sequences"] = [
            {"fill": "天天", "text": "天天天气很好。", "fills": ["天", "天"], **shared},
            {"fill": "夏天", "text": "夏天天气很好。", "fills": ["夏", "天"], **shared},
        ]
        route.fulfill(json=answer)

    page.goto(base_url)
    page.route("**/predict", ambiguous_first)
    choose_mode(page, "whole_word")
    box = page.get_by_test_id("input")
    box.fill(text)
    box.press("Enter")
    sentence = page.get_by_test_id("sentence")
    expect(sentence).to_have_text("天天天气很好。")
    expect(page.get_by_test_id("blank-0")).to_have_text("天")
    expect(page.get_by_test_id("blank-1")).to_have_text("天")
    page.get_by_test_id("sequence").nth(1).click()
    expect(sentence).to_have_text("夏天天气很好。")
    page.get_by_test_id("sequence").nth(0).click()
    first = page.locator('[data-testid="candidate"][data-mask="0"]').first
    token = first.get_attribute("data-value")
    first.click()
    expect(sentence).to_have_text(f"{token}天天气很好。")  # the first blank's 天 replaced


def test_english_toggle_and_phone_width(page: Page, base_url: str) -> None:
    page.set_viewport_size({"width": 375, "height": 800})
    page.goto(base_url)
    page.get_by_test_id("example-poem").click()
    expect(page.get_by_test_id("candidate")).to_have_count(5)
    overflow: Any = page.evaluate("document.documentElement.scrollWidth")
    assert overflow <= 375, "the page scrolls sideways at phone width"
    page.get_by_test_id("lang-toggle").click()
    expect(page.get_by_test_id("predict")).to_have_text("Predict")
    expect(page.get_by_test_id("lang-toggle")).to_have_text("中文")
    # the system panel, the latency badge and the tab's title follow at once (the panel kept
    # 线程 until its next refresh, up to 15 s)
    expect(page.get_by_test_id("info-engine")).to_contain_text("threads")
    # ... and when /info then fails (a key asked for, the server gone), the panel still
    # follows the language (it kept 线程: a review)
    page.route("**/info", lambda route: route.fulfill(status=503, body="{}"))
    page.get_by_test_id("lang-toggle").click()
    expect(page.get_by_test_id("info-engine")).to_contain_text("线程")
    page.get_by_test_id("lang-toggle").click()
    expect(page.get_by_test_id("info-engine")).to_contain_text("threads")
    page.unroute("**/info")
    expect(page.get_by_test_id("latency")).to_have_attribute("title", "server time")
    expect(page).to_have_title("Fill in the blank tiankong")
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "page-phone.png"), full_page=True)
    page.get_by_test_id("lang-toggle").click()
    expect(page.get_by_test_id("predict")).to_have_text("预测")


def test_chinese_content_is_marked_chinese_under_the_english_page(
    page: Page, base_url: str
) -> None:
    """Under the English page nothing was marked Chinese: a screen reader read 鸟 and the
    user's sentence with an English voice (a review)."""
    page.goto(base_url)
    page.get_by_test_id("lang-toggle").click()
    expect(page.locator("html")).to_have_attribute("lang", "en")
    expect(page.get_by_test_id("lang-toggle")).to_have_attribute("lang", "zh-CN")  # 中文
    page.get_by_test_id("predict").click()
    expect(page.get_by_test_id("candidate")).to_have_count(5)
    for testid in ("input", "sentence"):
        expect(page.get_by_test_id(testid)).to_have_attribute("lang", "zh-CN")
    expect(page.get_by_test_id("candidate").first.locator(".token")).to_have_attribute(
        "lang", "zh-CN"
    )
    page.get_by_test_id("lang-toggle").click()
    expect(page.get_by_test_id("lang-toggle")).to_have_attribute("lang", "en")  # English


def test_copy_without_the_clipboard_api_keeps_the_focus(browser: Browser, base_url: str) -> None:
    """On a plain-http LAN address there is no navigator.clipboard: the page copies through a
    scratch text box, which took the keyboard focus and left it on the page's body when it went
    (a review); it comes back to the copy button."""
    context = browser.new_context(locale="zh-CN")
    context.add_init_script("Object.defineProperty(navigator, 'clipboard', {value: undefined})")
    page = context.new_page()
    try:
        page.goto(base_url)
        page.get_by_test_id("predict").click()
        expect(page.get_by_test_id("candidate")).to_have_count(5)
        page.get_by_test_id("copy").focus()
        page.keyboard.press("Enter")
        expect(page.locator("#copied")).to_be_visible()
        assert page.evaluate("document.activeElement.id") == "copy"
    finally:
        context.close()


def test_candidates_mode_with_no_options_says_so_in_the_pages_language(
    page: Page, base_url: str
) -> None:
    """An empty options box sent the request, and the server's English 400 said "candidates is
    an empty list ... or leave it out" under a Chinese headline (a review): the page says it,
    sends nothing, and puts the caret in the box. The box's placeholder says it is an example."""
    sent: list[str] = []
    page.on(
        "request", lambda request: sent.append(request.url) if "/predict" in request.url else None
    )
    page.goto(base_url)
    choose_mode(page, "candidates")
    options = page.get_by_test_id("candidates-input")
    expect(options).to_have_attribute("placeholder", re.compile("^例如"))
    page.get_by_test_id("predict").click()
    expect(page.get_by_test_id("text-note")).to_have_text("请先填写候选词，再预测。")
    expect(options).to_be_focused()
    expect(page.get_by_test_id("error")).to_be_hidden()
    assert sent == []
    options.fill("鸟、花")
    page.get_by_test_id("predict").click()
    expect(page.get_by_test_id("option")).to_have_count(2)
    expect(page.get_by_test_id("text-note")).to_be_hidden()


def test_model_output_is_shown_as_text_never_html(page: Page, html_token_url: str) -> None:
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    page.goto(html_token_url)
    box = page.get_by_test_id("input")
    box.fill("画龙点[MASK]")
    box.press("Enter")
    candidates = page.get_by_test_id("candidate")
    expect(candidates).to_have_count(5)
    assert set(candidates.locator(".token").all_text_contents()) == {HTML_TOKEN}
    expect(page.get_by_test_id("sentence")).to_have_text(f"画龙点{HTML_TOKEN}")
    candidates.nth(1).click()
    # whole words are made of the same tokens; typed options are user text, also never markup
    choose_mode(page, "whole_word")
    box.fill("画[MASK]点[MASK]")
    box.press("Enter")
    # two separate blanks: their fills apart, as text
    expect(page.get_by_test_id("sequence").first.locator(".token")).to_have_text(
        f"{HTML_TOKEN} … {HTML_TOKEN}"
    )
    choose_mode(page, "candidates")
    page.get_by_test_id("candidates-input").fill("<b>粗</b> <s>x</s>")
    box.fill("画龙点[MASK]")
    box.press("Enter")
    expect(page.get_by_test_id("option")).to_have_count(2)
    page.get_by_test_id("option").first.click()
    assert page.locator("img, b, s").count() == 0
    page.wait_for_timeout(300)  # an injected onerror would have fired by now
    assert dialogs == []


def test_whole_word_and_candidate_modes(page: Page, base_url: str) -> None:
    page.goto(base_url)
    box = page.get_by_test_id("input")
    expect(page.get_by_test_id("mode-single")).to_be_checked()
    expect(page.get_by_test_id("candidates-input")).to_be_hidden()

    # whole word, chosen by keyboard: arrow keys move through the mode switch
    page.get_by_test_id("mode-single").focus()
    page.keyboard.press("ArrowRight")
    expect(page.get_by_test_id("mode-whole_word")).to_be_checked()
    expect(page.get_by_test_id("mode-hint")).to_contain_text("联合概率")
    box.fill(WHOLE_WORD)
    box.press("Enter")
    expected = api_answer(base_url, text=WHOLE_WORD, top_k=5, mode="whole_word")["sequences"]
    sequences = page.get_by_test_id("sequence")
    expect(sequences).to_have_count(len(expected))
    assert len(expected) == 5
    # the joint fills appear as whole words, ranked as the API ranks them
    assert sequences.locator(".token").all_text_contents() == [s["fill"] for s in expected]
    sentence = page.get_by_test_id("sentence")
    expect(sentence).to_have_text(expected[0]["text"])
    expect(sequences.nth(0)).to_have_attribute("aria-pressed", "true")
    blanks = (
        page.get_by_test_id("blank-0").text_content(),
        page.get_by_test_id("blank-1").text_content(),
    )
    assert "".join(part or "" for part in blanks) == expected[0]["fill"]
    assert len(expected[0]["fill"]) == 2  # two one-character tokens: the case below needs it
    assert blanks == tuple(expected[0]["fill"])  # one character a blank, not "" and both
    # a per-mask choice replaces its own blank's character only (5 candidates a mask)
    second = page.get_by_test_id("candidate").nth(6)
    token = second.get_attribute("data-value")
    second.click()
    expect(sentence).to_have_text(f"手机没电了，赶紧去{blanks[0]}{token}。")
    sequences.nth(2).click()
    expect(sentence).to_have_text(expected[2]["text"])
    expect(sequences.nth(2)).to_have_attribute("aria-pressed", "true")
    expect(sequences.nth(0)).to_have_attribute("aria-pressed", "false")
    sequences.nth(3).focus()
    page.keyboard.press("Enter")
    expect(sentence).to_have_text(expected[3]["text"])
    # the per-mask lists stay below, one per blank
    expect(page.get_by_test_id("candidate")).to_have_count(10)
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "page-modes-whole-word.png"), full_page=True)

    # candidates: options typed with mixed separators are ranked with their scores
    choose_mode(page, "candidates")
    options_box = page.get_by_test_id("candidates-input")
    expect(options_box).to_be_visible()
    box.fill(IDIOM_CLOZE)
    options_box.fill("一丝不苟、马马虎虎, 半途而废  画蛇添足")
    options_box.press("Enter")
    ranked = api_answer(base_url, text=IDIOM_CLOZE, candidates=IDIOMS)["candidates"]
    options = page.get_by_test_id("option")
    expect(options).to_have_count(4)
    assert options.locator(".token").all_text_contents() == [c["option"] for c in ranked]
    expect(page.get_by_test_id("joint-score")).to_have_count(4)
    # the model's own figure, named so: a whole fill's 整体 includes the index (a review)
    expect(page.get_by_test_id("joint-score").first).to_contain_text("模型整体")
    expect(sentence).to_have_text(ranked[0]["text"])
    expect(page.get_by_test_id("sequence")).to_have_count(0)
    expect(page.get_by_test_id("candidate")).to_have_count(0)  # no per-mask lists here
    options.nth(2).click()
    expect(sentence).to_have_text(ranked[2]["text"])
    expect(page.get_by_test_id("blank-0")).to_have_text(ranked[2]["option"])
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "page-modes.png"), full_page=True)

    # constraints: renormalised and raw scores side by side, the same tokens as the API
    choose_mode(page, "single")
    page.get_by_test_id("advanced").locator("summary").click()
    page.get_by_test_id("preset").select_option("chinese_only")
    page.get_by_test_id("exclude").fill("鸟")
    box.fill(POEM)
    box.press("Enter")
    constrained = api_answer(base_url, text=POEM, top_k=5, preset="chinese_only", exclude=["鸟"])
    candidates = page.get_by_test_id("candidate")
    expect(candidates).to_have_count(5)
    tokens = [c["token"] for c in constrained["predictions"]]
    assert candidates.locator(".token").all_text_contents() == tokens
    expect(page.get_by_test_id("raw-score")).to_have_count(5)
    expect(page.get_by_test_id("raw-score").first).to_contain_text("原始")
    expect(page.get_by_test_id("constraint-note")).to_be_visible()

    # the note explains the per-mask lists' 原始 column: a [BLANK] under constraints shows no
    # such lists, and the note went with them (it stayed, naming a column nowhere shown)
    box.fill("今天天气很[BLANK]。")
    box.press("Enter")
    expect(page.get_by_test_id("sequence").first).to_be_visible()
    expect(page.get_by_test_id("candidate")).to_have_count(0)
    expect(page.get_by_test_id("constraint-note")).to_be_hidden()

    # a [BLANK] example: fills of any length, ranked per character, no per-mask lists
    page.get_by_test_id("preset").select_option("")
    page.get_by_test_id("exclude").fill("")
    page.get_by_test_id("example-blank").click()
    expect(page.get_by_test_id("sentence")).to_contain_text("我们去公园")  # its own answer
    expect(page.get_by_test_id("sequence")).to_have_count(5)
    expect(page.get_by_test_id("candidate")).to_have_count(0)
    expect(page.get_by_test_id("constraint-note")).to_be_hidden()
    # the shown numbers are the ones that rank the fills (the per-character ones, shown
    # before, read out of order: 54.1%, 28.7%, 27.7%, 33.1%)
    fills = api_answer(base_url, text="今天天气很[BLANK]，我们去公园吧。", top_k=5)["sequences"]
    shown = page.get_by_test_id("sequence").locator(".main-score").all_text_contents()
    scores = [s["rank_score"] for s in fills]
    assert scores == sorted(scores, reverse=True)
    assert [float(text.rstrip("%")) for text in shown] == pytest.approx(
        [100 * score for score in scores], abs=0.051
    )


def test_modes_at_phone_width_in_english(page: Page, base_url: str) -> None:
    page.set_viewport_size({"width": 375, "height": 800})
    page.goto(base_url)
    page.get_by_test_id("lang-toggle").click()
    expect(page.get_by_test_id("mode-hint")).to_contain_text("[BLANK]")
    page.get_by_test_id("example-choice").click()  # sets candidates mode and its options
    expect(page.get_by_test_id("mode-candidates")).to_be_checked()
    expect(page.get_by_test_id("option")).to_have_count(4)
    expect(page.get_by_test_id("joint-score").first).to_contain_text("model, whole")
    page.get_by_test_id("advanced").locator("summary").click()
    expect(page.get_by_test_id("preset")).to_be_visible()
    overflow: Any = page.evaluate("document.documentElement.scrollWidth")
    assert overflow <= 375, "the page scrolls sideways at phone width"
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "page-modes-phone.png"), full_page=True)
    # at 320 px a [BLANK] fill's score line took the bar's column (0 px wide) and ran over the
    # fill: each row keeps a bar, and its score starts after its fill
    page.set_viewport_size({"width": 320, "height": 800})
    page.get_by_test_id("example-blank").click()
    rows = page.locator("#sequences-box .candidate")
    expect(rows.first).to_be_visible()
    for row in rows.all():
        bar, token, score = (
            row.locator(part).bounding_box() for part in (".bar-track", ".token", ".score")
        )
        assert bar is not None and token is not None and score is not None
        assert bar["width"] >= 16 and score["x"] >= token["x"] + token["width"]
    page.get_by_test_id("lang-toggle").click()  # back to Chinese for the next test


def test_bad_option_is_shown_in_words(page: Page, base_url: str) -> None:
    page.goto(base_url)
    choose_mode(page, "candidates")
    box = page.get_by_test_id("input")
    box.fill("他[MASK]天去公园[MASK]步。")  # two blanks: candidates need one
    page.get_by_test_id("candidates-input").fill("散、跑")
    box.press("Enter")
    error = page.get_by_test_id("error")
    expect(error).to_be_visible()
    expect(error).to_contain_text("句子或选项不合要求")
    expect(error).to_contain_text("exactly one blank")


API_KEY = "page-key-0123456789"


@pytest.fixture(scope="module")
def keyed_url(tiny_model_dir: Path, tiny_masker: FillMasker) -> Iterator[str]:
    settings = Settings(engine="torch", threads=1, model=str(tiny_model_dir), api_keys=(API_KEY,))
    with serve_in_thread(create_app(settings, tiny_masker)) as url:
        yield url


def test_the_page_works_with_api_keys_on(page: Page, keyed_url: str, tiny_model_dir: Path) -> None:
    page.goto(keyed_url)  # the page itself is public
    # the key's hint says a key is wanted before anything is asked (it said so only after a
    # prediction failed)
    expect(page.get_by_test_id("api-key-hint")).to_contain_text("要求 API 密钥")
    box = page.get_by_test_id("input")
    box.press("Enter")
    error = page.get_by_test_id("error")
    expect(error).to_contain_text("API 密钥")
    expect(page.get_by_test_id("api-key")).to_be_focused()
    expect(page.get_by_test_id("info-model")).to_have_text("…")  # /info needs the key too
    page.get_by_test_id("api-key").fill("密钥")  # not a key: said so, not "cannot reach"
    box.press("Enter")
    expect(error).to_contain_text("ASCII")
    expect(error).not_to_contain_text("无法连接")
    page.get_by_test_id("api-key").fill(API_KEY)
    page.get_by_test_id("api-key").press("Tab")  # change: stored, and the panel reloads
    expect(page.get_by_test_id("info-model")).to_have_text(tiny_model_dir.name)
    expect(page.get_by_test_id("api-key-hint")).to_contain_text("才需要")
    box.press("Enter")
    expect(page.get_by_test_id("candidate")).to_have_count(5)
    expect(error).to_be_hidden()
    page.reload()  # kept in this browser (localStorage), sent as a bearer token
    expect(page.get_by_test_id("api-key")).to_have_value(API_KEY)
    page.get_by_test_id("input").press("Enter")
    expect(page.get_by_test_id("candidate")).to_have_count(5)


@pytest.fixture(scope="module")
def grounded_url(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The tiny model with a one-line corpus index whose line carries markup."""
    from tiankong.index import build_index

    folder = tmp_path_factory.mktemp("grounded")
    notes = folder / "notes.txt"
    notes.write_text(f"今天天气很好，我们去公园散步。{HTML_TOKEN}\n", encoding="utf-8")
    build_index([notes], folder / "index", progress=False)
    settings = Settings(engine="torch", threads=1, model=str(tiny_model_dir))
    masker = FillMasker.load(settings=settings, index=str(folder / "index"))
    # a tiny random model finds every real word absurd; the plausibility rule has its own tests
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(combine, "MIN_MODEL_RATIO", 0.0)
        with serve_in_thread(create_app(settings, masker)) as url:
            yield url


def test_source_line_under_a_grounded_candidate(page: Page, grounded_url: str) -> None:
    """出处: the index's example line shows under the candidate it supports, as text."""
    page.goto(grounded_url)
    expect(page.get_by_test_id("info-index")).to_contain_text("1 段文本")
    box = page.get_by_test_id("input")
    box.fill("今天天气很[MASK]，我们去公园散步。")
    box.press("Enter")
    expect(page.get_by_test_id("candidate")).to_have_count(5)
    source = page.get_by_test_id("source")
    expect(source).to_have_count(1)  # only the candidate the index supports has one
    expect(source).to_contain_text("出处 ×1")
    expect(source).to_contain_text(f"今天天气很好，我们去公园散步。{HTML_TOKEN}")
    # the part of the line that matches the user's text is highlighted
    expect(source.get_by_test_id("source-match")).to_have_text("今天天气很好，我们去公园散步。")
    row = page.locator("li", has=source)
    expect(row.locator(".token")).to_have_text("好")
    expect(row.get_by_test_id("model-score")).to_contain_text("模型")
    assert page.locator(".source img").count() == 0  # the markup stayed text
    expect(page.get_by_test_id("sentence")).to_have_text("今天天气很好，我们去公园散步。")
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "page-source.png"), full_page=True)
    tiny = page.evaluate("import('./static/render.js').then((m) => m.formatPercent(2.1e-6))")
    assert tiny == "<0.01%"
    # an option of one character shows its model score once, as 模型整体 (模型 repeated it)
    shown = page.evaluate(
        """import('./static/render.js').then((m) => {
          const list = document.createElement('ol');
          const memory = {count: 1, match: '点睛', example: '画龙点睛'};
          const one = {option: '睛', text: '画龙点睛', score: 0.5, joint: 0.01, model_score: 0.01,
                       in_vocabulary: true, memory};
          const two = {...one, option: '马虎', text: '马马虎虎', model_score: 0.1};
          m.renderOptions(list, [one, two], (key) => key, () => {});
          return [...list.children].map(
            (row) => row.querySelectorAll('[data-testid=model-score]').length);
        })"""
    )
    assert shown == [0, 1]
    # a whole fill of separate blanks reads as separate fills, of one run as one word
    labels = page.evaluate(
        """import('./static/render.js').then((m) => {
          const list = document.createElement('ol');
          const fill = (fills) => ({fill: fills.join(''), fills, text: '', score: 0.1,
                                    normalised: 0.1, rank_score: 0.1});
          m.renderSequences(list, [fill(['蛟', '名', '名'])], false, (key) => key, () => {},
                            ['', '龙点', '，', '不虚传。']);
          const apart = list.querySelector('.token').textContent;
          m.renderSequences(list, [fill(['吃', '饭'])], false, (key) => key, () => {},
                            ['我们去', '', '吧。']);
          return [apart, list.querySelector('.token').textContent];
        })"""
    )
    assert labels == ["蛟 … 名 … 名", "吃饭"]
    expect(page.get_by_test_id("warnings")).to_be_hidden()
    box.fill("The weather is [MASK].")
    box.press("Enter")
    # the server's warning in the page's language (it was English on the Chinese page)
    expect(page.get_by_test_id("warnings")).to_have_text(
        "句子里没有汉字：这个模型是中文的，这里的答案意义不大。"
    )
    page.get_by_test_id("lang-toggle").click()
    expect(page.get_by_test_id("warnings")).to_contain_text("no Chinese (Han) character")
    page.get_by_test_id("lang-toggle").click()


def test_every_warning_the_server_words_alike_is_in_the_pages_chinese() -> None:
    """The page shows a server warning in Chinese by its exact English words (i18n.js); a
    warning reworded on the server would fall back to English unnoticed."""
    from tiankong.core.request import NO_WHOLE_FILL_WARNING, TYPED_SCRIPT_WARNING
    from tiankong.core.script import NO_HAN_WARNING
    from tiankong.server.routes import STATIC_DIR
    from tiankong.tasks.check.proofreader import (
        BLANK_IN_CHECK,
        MORE_MAY_REMAIN,
        NO_HAN_TO_CHECK,
        NOTHING_CHECKED,
        SOME_UNREAD,
    )

    words = (STATIC_DIR / "i18n.js").read_text(encoding="utf-8")
    fixed = [
        NO_HAN_WARNING,
        NO_WHOLE_FILL_WARNING,
        TYPED_SCRIPT_WARNING,
        NO_HAN_TO_CHECK,
        BLANK_IN_CHECK,
    ]
    for warning in [*fixed, NOTHING_CHECKED, SOME_UNREAD, MORE_MAY_REMAIN]:
        assert f'"{warning}":' in words, warning


def test_every_error_code_has_the_pages_chinese_headline() -> None:
    """The Chinese page heads an error by its code (i18n.js); a code missing there was shown
    as the generic 出错了。 over the server's English sentence (a review: batch_too_large,
    unsupported_media_type, not_found, method_not_allowed)."""
    import re

    import tiankong.errors as errors
    import tiankong.tasks.check  # noqa: F401  (any error classes of its own are defined)
    from tiankong.server.routes import STATIC_DIR

    codes = {"not_found", "method_not_allowed"}  # Starlette's, by their HTTP phrase
    classes = [errors.TiankongError]
    while classes:
        klass = classes.pop()
        codes.add(klass.code)
        classes.extend(klass.__subclasses__())
    words = (STATIC_DIR / "i18n.js").read_text(encoding="utf-8")
    chinese = words[: words.index("  en: {")]
    block = chinese[chinese.index("    errors: {") :]
    block = block[: block.index("    },")]
    shown = set(re.findall(r"^\s+([a-z_]+): \"", block, re.MULTILINE))
    assert sorted(codes - shown) == []


def test_a_blank_no_whole_fill_keeps_to_shows_its_positions_list(page: Page, base_url: str) -> None:
    """The warning for a [BLANK] no whole fill of which keeps to the constraints says each
    position's answers are shown below; the page hid the per-mask list of every [BLANK] (a
    review): here it shows it, the list the sentence's fill came from."""
    text = "今天天气很[BLANK]，我们去公园吧。"
    allowed = "非常好的天气"  # 6 characters: no blank length fits
    answer = api_answer(base_url, text=text, allowed=[allowed], top_k=5)
    assert answer["sequences"] == [] and answer["warnings"]
    tokens = [candidate["token"] for candidate in answer["masks"][0]]
    page.goto(base_url)
    page.get_by_test_id("advanced").locator("summary").click()
    page.get_by_test_id("allowed").fill(allowed)
    page.get_by_test_id("input").fill(text)
    page.get_by_test_id("input").press("Enter")
    expect(page.get_by_test_id("warnings")).to_contain_text("下面是每个空各自的候选")
    expect(page.get_by_test_id("results")).to_be_visible()
    expect(page.locator("#per-mask-title")).to_be_visible()  # the list the warning names
    expect(page.get_by_test_id("results").get_by_test_id("candidate")).to_have_count(len(tokens))
    expect(page.get_by_test_id("sentence")).to_contain_text(tokens[0])


def test_a_rate_limit_says_how_long_to_wait(page: Page, base_url: str) -> None:
    """A 429 showed "请求太频繁了，请稍后再试。" where the wait was 14 minutes (a review): the
    page names the Retry-After's wait, in minutes past two of them, in either language."""
    limited = (
        '{"error": {"code": "rate_limited", "message": "Too many requests: at most 20 forward '
        'rows a minute (a plain text is 1, a search its rows); retry in 840 s."}}'
    )
    waits = iter(["840", "30"])
    page.goto(base_url)
    page.route(
        "**/predict",
        lambda route: route.fulfill(
            status=429,
            body=limited,
            content_type="application/json",
            headers={"Retry-After": next(waits)},
        ),
    )
    page.get_by_test_id("input").press("Enter")
    expect(page.get_by_test_id("error")).to_contain_text("请求太频繁了：请 14 分钟后再试。")
    page.get_by_test_id("input").press("Enter")
    expect(page.get_by_test_id("error")).to_contain_text("请 30 秒后再试")
    page.get_by_test_id("lang-toggle").click()
    expect(page.get_by_test_id("error")).to_contain_text("Too many requests: try again in 30 s.")


def test_a_mode_switch_clears_the_error_and_note_of_the_mode_left(
    page: Page, base_url: str
) -> None:
    """单字's 「句子里没有 [MASK]」 stayed in 校对 (whose insert button is hidden), and kept the
    saved check of the same text from being shown again; 校对's "at most 2,000" stayed in
    单字, whose limit is 10,000; the notes under the text box stayed too (a review)."""
    page.goto(base_url)
    box = page.get_by_test_id("input")
    error = page.get_by_test_id("error")
    note = page.get_by_test_id("text-note")
    choose_mode(page, "check")
    box.fill("守株待免")
    box.press("Enter")
    expect(page.get_by_test_id("check-output")).to_be_visible()
    choose_mode(page, "single")
    box.press("Enter")
    expect(error).to_contain_text("没有 [MASK]")
    choose_mode(page, "check")
    expect(error).to_be_hidden()
    expect(page.get_by_test_id("check-output")).to_be_visible()  # the check of this text
    # the other way: 校对's limit is not 单字's
    box.fill("好" * 2001)
    box.press("Enter")
    expect(error).to_be_visible()
    choose_mode(page, "single")
    expect(error).to_be_hidden()
    # the notes: 候选's empty box, 校对's changed text
    choose_mode(page, "candidates")
    page.get_by_test_id("predict").click()
    expect(note).to_have_text("请先填写候选词，再预测。")
    choose_mode(page, "single")
    expect(note).to_be_hidden()
    choose_mode(page, "check")
    box.fill("守株待免")
    box.press("Enter")
    expect(page.get_by_test_id("check-output")).to_be_visible()
    box.press_sequentially("。")
    expect(note).to_have_text("文字已改动，请重新校对。")
    choose_mode(page, "whole_word")
    expect(note).to_be_hidden()


def test_candidates_are_checked_in_the_pages_language(page: Page, base_url: str) -> None:
    """睛 睛 came back "The candidate '睛' is given twice." in English under a Chinese headline
    (a review): a repeated candidate is sent once, one longer than the server takes (8
    characters, as /info's limits publish it) is said in the page's language and nothing is
    sent, and a server's English reason that is still shown is marked as the server's, in
    English."""
    bodies: list[Any] = []
    page.on(
        "request",
        lambda request: (
            bodies.append(json.loads(request.post_data or "null"))
            if request.url.endswith("/predict")
            else None
        ),
    )
    page.goto(base_url)
    expect(page.get_by_test_id("info-model")).not_to_have_text("…")  # /info (its limits) read
    choose_mode(page, "candidates")
    box = page.get_by_test_id("input")
    options = page.get_by_test_id("candidates-input")
    error = page.get_by_test_id("error")
    box.fill("画龙点[MASK]")
    options.fill("睛 睛、晴")
    box.press("Enter")
    expect(page.get_by_test_id("option")).to_have_count(2)
    expect(error).to_be_hidden()
    assert bodies[-1]["candidates"] == ["睛", "晴"]

    bodies.clear()
    options.fill("睛、一二三四五六七八九")
    box.press("Enter")
    note = page.get_by_test_id("text-note")
    expect(note).to_have_text("候选词「一二三四五六七八九」太长了：每个最多 8 个字。")
    expect(options).to_be_focused()
    page.get_by_test_id("lang-toggle").click()
    expect(note).to_have_text(
        "The option 一二三四五六七八九 is too long: at most 8 characters each."
    )
    page.get_by_test_id("lang-toggle").click()
    options.fill(" ".join(chr(0x4E00 + i) for i in range(51)))
    box.press("Enter")
    expect(note).to_have_text("候选词最多 50 个，现在有 51 个。")
    assert bodies == []

    # the server's own reason: marked English, and said to be the server's
    box.fill("他[MASK]天去公园[MASK]步。")
    options.fill("散、跑")
    box.press("Enter")
    expect(note).to_be_hidden()
    detail = error.locator(".detail")
    expect(detail).to_have_attribute("lang", "en")
    expect(detail).to_contain_text(re.compile(r"^服务器的说明（英文）：.*exactly one blank"))


def test_a_proxys_error_page_is_reported_as_no_api_answer(page: Page, base_url: str) -> None:
    """A proxy's 504 HTML page was 「出错了。 HTTP 504」: a non-JSON error answer is told as the
    non-JSON 200 is, with its status, in both languages (a review)."""
    error = html_answer(page, base_url, 504, "<html><h1>504 Gateway Time-out</h1></html>")
    expect(error).to_contain_text("HTTP 504")
    expect(error).not_to_contain_text("出错了")
    page.get_by_test_id("lang-toggle").click()
    expect(error).to_contain_text("not the API's JSON")
    expect(error).to_contain_text("HTTP 504")
    page.get_by_test_id("lang-toggle").click()


def test_a_lost_connection_is_said_in_words(page: Page, base_url: str) -> None:
    """A network failure showed the browser's «TypeError: Failed to fetch» (a review): it is a
    sentence in the page's language, the raw words go to the console."""
    warned: list[str] = []
    page.on(
        "console",
        lambda message: warned.append(message.text) if message.type == "warning" else None,
    )
    page.goto(base_url)
    page.route("**/predict", lambda route: route.abort("connectionrefused"))
    page.get_by_test_id("input").press("Enter")
    error = page.get_by_test_id("error")
    expect(error).to_contain_text("无法连接服务器")
    expect(error).not_to_contain_text("TypeError")
    expect(error).not_to_contain_text("fetch")
    assert any("Failed to fetch" in text for text in warned), warned


def test_an_example_clears_the_constraints_it_does_not_set(page: Page, base_url: str) -> None:
    """The examples ran with whatever constraints were left in the folded area, so 诗句 could
    answer 莺 with nothing in sight saying why (a review): an example sets its own mode and
    clears the constraints, and its request carries none."""
    page.goto(base_url)
    page.get_by_test_id("advanced").locator("summary").click()
    page.get_by_test_id("preset").select_option("chinese_only")
    page.get_by_test_id("allowed").fill("莺")
    page.get_by_test_id("exclude").fill("鸟")
    page.get_by_test_id("advanced").locator("summary").click()  # folded again, out of sight
    with page.expect_request("**/predict") as asked:
        page.get_by_test_id("example-poem").click()
    body = asked.value.post_data_json
    assert not {"preset", "allowed", "exclude"} & set(body), body
    expect(page.get_by_test_id("candidate")).to_have_count(5)
    assert page.get_by_test_id("candidate").locator(".token").all_text_contents() == api_tokens(
        base_url, POEM, 5
    )
    for field in ("preset", "allowed", "exclude"):
        expect(page.get_by_test_id(field)).to_have_value("")


def test_a_chosen_candidate_stays_chosen_when_the_count_changes(page: Page, base_url: str) -> None:
    """Changing 候选数 asked again and put the top answer back: a chosen 莺 went back to 鸟 (a
    review). The candidate chosen stays chosen while the new list still has it."""
    page.goto(base_url)
    page.get_by_test_id("predict").click()
    candidates = page.get_by_test_id("candidate")
    expect(candidates).to_have_count(5)
    expected = api_tokens(base_url, POEM, 10)
    sentence = page.get_by_test_id("sentence")
    candidates.nth(3).click()
    expect(sentence).to_have_text(POEM.replace("[MASK]", expected[3]))
    page.get_by_test_id("top-k").select_option("10")
    expect(candidates).to_have_count(10)
    expect(sentence).to_have_text(POEM.replace("[MASK]", expected[3]))
    expect(candidates.nth(3)).to_have_attribute("aria-pressed", "true")
    # a list too short for it: the top answer, as for any new answer
    page.get_by_test_id("top-k").select_option("3")
    expect(candidates).to_have_count(3)
    expect(sentence).to_have_text(POEM.replace("[MASK]", expected[0]))
    expect(candidates.nth(0)).to_have_attribute("aria-pressed", "true")
