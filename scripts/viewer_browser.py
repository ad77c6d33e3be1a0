"""Opens agent-eval's viewer pages in headless Chromium (Debian's, through chromium-driver and
Selenium), uses them as a person would — keys, links, search — and prints what it saw as JSON,
for Tests/CLITests/ViewerBrowserTests.swift to check. Saves a screenshot of every page.

    python viewer_browser.py SHOTS_DIR KIND=PAGE[,ARG...] ...

KIND is run, report, baseline, diff, hostile, long, fork, forks, pipelinefork, pipelinebroken or diffproblems:
  run=page.html,SEARCH,JUMP   keys n/p/f, search for SEARCH, jump to step JUMP, a #step-JUMP link
  report=page.html[,LINK]     every failure link lands on its step in the embedded run; LINK, a
                              `view:` line's page.html#log=…&step=N, opens that run at that step
  baseline=page.html          the same, for a report compared with a baseline
  diff=page.html              the first divergence's row, steps side by side, the marked argument
  hostile=page.html           planted markup stayed text and no planted script ran
  long=page.html              time to open a long run, jump to its last step, search it
  fork=page.html              a fork's panel: its parent, edits and where it parts from the parent
  forks=page.html             a parent's page: the forks of the run it lists
  pipelinefork=page.html      a pipeline fork's page: whose fork it is, the attempts it discarded
  pipelinebroken=page.html    a pipeline's page: its banner and the child logs listed as missing
  diffproblems=page.html      a diff where a log does not check out: no green banner, its problems listed

Exits 1 with a message when Chromium or its driver is missing (scripts/python_venv browser
installs them).
"""

import json
import os
import shutil
import sys
import tempfile
import time

import chromium_driver
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import WebDriverWait


def browser():
    return chromium_driver.browser("viewer_browser", "--allow-file-access-from-files")


def url(path, fragment=""):
    return "file://" + os.path.abspath(path) + (("#" + fragment) if fragment else "")


def load(driver, path, fragment="", timeout=30):
    """Opens the page fresh and waits until its script has drawn it; returns seconds taken."""
    driver.get("about:blank")
    start = time.monotonic()
    driver.get(url(path, fragment))
    try:
        WebDriverWait(driver, timeout).until(
            lambda d: d.execute_script("return document.body && document.body.dataset.ready"))
    except Exception:
        raise RuntimeError("the page was not drawn within %d s; the console said: %s" % (timeout, severe_logs(driver)))
    if ready(driver) != "true":
        raise RuntimeError("the page failed to draw: %s" % driver.execute_script(
            "return document.body.dataset.error || document.getElementById('app').textContent"))
    return time.monotonic() - start


def ready(driver):
    return driver.execute_script("return document.body.dataset.ready")


def current_step(driver):
    value = driver.execute_script("return document.body.dataset.currentStep")
    return None if value is None else int(value)


def press(driver, keys):
    body = driver.find_element(By.TAG_NAME, "body")
    for key in keys:
        body.send_keys(key)


def severe_logs(driver):
    return chromium_driver.severe_logs(driver)


def check_run(driver, page, search, jump):
    seen = {"load_seconds": load(driver, page), "ready": ready(driver)}
    seen["steps"] = int(driver.execute_script("return document.querySelector('.run-view').dataset.steps"))
    seen["first_step"] = current_step(driver)
    seen["cards_drawn"] = len(driver.find_elements(By.CSS_SELECTOR, "section.step"))
    seen["tools_in_summary"] = driver.execute_script(
        "return Array.from(document.querySelectorAll('table.tools tr[data-tool]')).map(r => r.dataset.tool)")
    press(driver, "n")
    seen["after_n"] = current_step(driver)
    press(driver, "p")
    seen["after_p"] = current_step(driver)
    press(driver, "f")
    seen["after_f"] = current_step(driver)
    seen["problems_on_that_step"] = driver.execute_script(
        "return Array.from(document.querySelectorAll('section.step.current .problem')).map(p => p.dataset.kind)")
    press(driver, "/")
    active = driver.switch_to.active_element
    active.send_keys(search)
    seen["search_matches"] = int(driver.execute_script(
        "return Number(document.querySelector('.search-status').dataset.matches || 0)"))
    active.send_keys(Keys.ENTER)
    seen["after_search_enter"] = current_step(driver)
    seen["search_step_mentions"] = driver.execute_script(
        "const c = document.querySelector('section.step.current'); return c ? c.textContent.includes(arguments[0]) : false", search)
    active.send_keys(Keys.ESCAPE)
    press(driver, "g")
    box = driver.switch_to.active_element
    box.send_keys(str(jump), Keys.ENTER)
    seen["after_jump"] = current_step(driver)
    seen["hash_after_jump"] = driver.execute_script("return location.hash")
    driver.find_element(By.ID, "keys-hint").click()
    seen["help_shown"] = driver.execute_script("return !document.getElementById('help').hidden")
    driver.find_element(By.ID, "keys-hint").click()
    load(driver, page, "step-%d" % jump)
    seen["deep_link_step"] = current_step(driver)
    seen["deep_link_card_is_current"] = driver.execute_script(
        "const c = document.getElementById('step-' + arguments[0]); return !!c && c.classList.contains('current')", jump)
    # A stored content opens on demand.
    opened = driver.execute_script(
        "const d = document.querySelector('details.content'); if (!d) return null;"
        "d.open = true; return new Promise(r => setTimeout(() => r(d.querySelectorAll('pre').length), 50))")
    seen["content_opened"] = opened
    seen["severe_console"] = severe_logs(driver)
    return seen


def check_report(driver, page, look=None):
    seen = {}
    if look:
        # A `view:` line's link: page.html#log=<log>&step=N opens that run at that step.
        fragment = look.split("#", 1)[1]
        load(driver, page, fragment)
        seen["look_step"] = current_step(driver)
        seen["look_log"] = driver.execute_script("return document.querySelector('#run-panel .run-view').dataset.log")
    seen.update({"load_seconds": load(driver, page), "ready": ready(driver)})
    seen["sections"] = driver.execute_script(
        "return Array.from(document.querySelectorAll('h2.section-title')).map(h => h.id.replace('section-', ''))")
    seen["case_rows"] = len(driver.find_elements(By.CSS_SELECTOR, "tr.case-row"))
    links = driver.find_elements(By.CSS_SELECTOR, "a.failure-link")
    seen["failure_links"] = len(links)
    landings = []
    for index in range(len(links)):
        link = driver.find_elements(By.CSS_SELECTOR, "a.failure-link")[index]
        wanted = int(link.get_attribute("data-step"))
        wanted_log = link.get_attribute("data-log")
        driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", link)
        link.click()
        WebDriverWait(driver, 10).until(lambda d: current_step(d) == wanted)
        card = driver.execute_script(
            "const c = document.querySelector('#run-panel section.step.current'); return c ? Number(c.dataset.step) : null")
        landings.append({"wanted": wanted, "wanted_log": wanted_log, "current": current_step(driver), "card": card,
                         "run_log": driver.execute_script("return document.querySelector('#run-panel .run-view').dataset.log")})
    seen["landings"] = landings
    seen["severe_console"] = severe_logs(driver)
    return seen


def check_diff(driver, page):
    seen = {"load_seconds": load(driver, page), "ready": ready(driver)}
    seen["rows"] = len(driver.find_elements(By.CSS_SELECTOR, "table.diff-rows tr[data-row]"))
    seen["first_row"] = driver.execute_script(
        "const r = document.querySelector('table.diff-rows tr.first'); return r ? Number(r.dataset.row) : null")
    seen["selected_row"] = driver.execute_script("return Number(document.body.dataset.selectedRow)")
    for side in ("left", "right"):
        seen["marked_" + side] = driver.execute_script(
            "return Array.from(document.querySelectorAll('#diff-steps .side.%s mark.divergence')).map(m => m.textContent)" % side)
    seen["diverging_events"] = len(driver.find_elements(By.CSS_SELECTOR, "#diff-steps .event.diverges"))
    seen["banner"] = driver.find_element(By.ID, "first-divergence").text if driver.find_elements(By.ID, "first-divergence") else None
    press(driver, "n")
    seen["after_n"] = driver.execute_script("return Number(document.body.dataset.selectedRow)")
    press(driver, "f")
    seen["after_f"] = driver.execute_script("return Number(document.body.dataset.selectedRow)")
    seen["severe_console"] = severe_logs(driver)
    return seen


def check_diff_problems(driver, page):
    """A diff where a log does not check out: its heading, no green banner, and the problems listed."""
    seen = {"load_seconds": load(driver, page), "ready": ready(driver)}
    seen["heading"] = driver.find_element(By.TAG_NAME, "h1").text
    seen["green_banners"] = len(driver.find_elements(By.CSS_SELECTOR, ".banner-ok"))
    seen["problems"] = {
        box.get_attribute("data-side"): [item.text for item in box.find_elements(By.TAG_NAME, "li")]
        for box in driver.find_elements(By.CSS_SELECTOR, ".diff-problems")
    }
    seen["severe_console"] = severe_logs(driver)
    return seen


def check_hostile(driver, page):
    seen = {"load_seconds": load(driver, page), "ready": ready(driver)}
    # Draw every step and open every collapsed payload, so every planted string is in the DOM.
    driver.execute_script(
        "document.querySelectorAll('details').forEach(d => { d.open = true; d.dispatchEvent(new Event('toggle')); })")
    seen["pwned"] = driver.execute_script("return window.__pwned === undefined ? null : window.__pwned")
    seen["scripts"] = len(driver.find_elements(By.TAG_NAME, "script"))
    seen["images"] = len(driver.find_elements(By.TAG_NAME, "img"))
    seen["iframes"] = len(driver.find_elements(By.TAG_NAME, "iframe"))
    seen["planted_text_shown"] = driver.execute_script(
        "return document.getElementById('app').textContent.includes('<script>window.__pwned')")
    seen["title"] = driver.title
    seen["severe_console"] = severe_logs(driver)
    return seen


def check_long(driver, page):
    seen = {"load_seconds": load(driver, page, timeout=300), "ready": ready(driver)}
    seen["steps"] = int(driver.execute_script("return document.querySelector('.run-view').dataset.steps"))
    seen["nav_rows_drawn"] = len(driver.find_elements(By.CSS_SELECTOR, ".steps-nav .row"))
    seen["cards_drawn"] = len(driver.find_elements(By.CSS_SELECTOR, "section.step"))
    last = driver.execute_script(
        "const v = document.querySelector('.run-view'); return Number(v.dataset.lastStep)")
    start = time.monotonic()
    press(driver, "g")
    driver.switch_to.active_element.send_keys(str(last), Keys.ENTER)
    seen["jump_seconds"] = time.monotonic() - start
    seen["after_jump"] = current_step(driver)
    seen["last_step"] = last
    start = time.monotonic()
    driver.execute_script("const v = document.querySelector('.steps-nav .viewport'); v.scrollTop = v.scrollHeight / 2;"
                          "v.dispatchEvent(new Event('scroll'))")
    seen["scroll_seconds"] = time.monotonic() - start
    seen["nav_rows_after_scroll"] = len(driver.find_elements(By.CSS_SELECTOR, ".steps-nav .row"))
    start = time.monotonic()
    press(driver, "/")
    driver.switch_to.active_element.send_keys("tool_1")
    seen["search_seconds"] = time.monotonic() - start
    seen["search_matches"] = int(driver.execute_script(
        "return Number(document.querySelector('.search-status').dataset.matches || 0)"))
    seen["severe_console"] = severe_logs(driver)
    return seen


def check_fork(driver, page):
    """A fork's page: its panel (parent, edits, where it parts), and the run_forked row of its step."""
    seen = {"load_seconds": load(driver, page), "ready": ready(driver)}
    panels = driver.find_elements(By.CSS_SELECTOR, ".panel.fork")
    seen["fork_panel"] = panels[0].text if panels else None
    seen["nav_mentions_fork"] = driver.execute_script(
        "return Array.from(document.querySelectorAll('.steps-nav .row')).some(r => r.textContent.includes('fork'))")
    seen["severe_console"] = severe_logs(driver)
    return seen


def check_forks(driver, page):
    """A parent's page: the forks of the run it lists."""
    seen = {"load_seconds": load(driver, page), "ready": ready(driver)}
    seen["forks"] = [item.text for item in driver.find_elements(By.CSS_SELECTOR, "[id$='forks'] li")]
    seen["severe_console"] = severe_logs(driver)
    return seen


def check_pipeline_fork(driver, page):
    """A pipeline fork's page: whose fork it is, and the tasks it ran again."""
    seen = {"load_seconds": load(driver, page), "ready": ready(driver)}
    notes = driver.find_elements(By.ID, "pipeline-fork")
    seen["fork_note"] = notes[0].text if notes else None
    seen["discarded_attempts"] = len(driver.find_elements(By.CSS_SELECTOR, ".attempt-row.discarded"))
    seen["severe_console"] = severe_logs(driver)
    return seen


def check_pipeline(driver, page):
    """A pipeline's page: its banner, and the child logs it lists as missing or damaged."""
    seen = {"load_seconds": load(driver, page), "ready": ready(driver)}
    banner = driver.find_element(By.ID, "pipeline-banner")
    seen["banner"] = banner.text
    seen["banner_class"] = banner.get_attribute("class")
    seen["child_log_problems"] = [item.text for item in driver.find_elements(By.CSS_SELECTOR, "#child-log-problems li")]
    seen["severe_console"] = severe_logs(driver)
    return seen


CHECKS = {
    "run": check_run, "report": check_report, "baseline": check_report, "diff": check_diff, "hostile": check_hostile, "long": check_long,
    "fork": check_fork, "forks": check_forks, "pipelinefork": check_pipeline_fork,
    "pipelinebroken": check_pipeline, "diffproblems": check_diff_problems,
}


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    shots = sys.argv[1]
    os.makedirs(shots, exist_ok=True)
    # Chromium leaves its singleton-socket directories in TMPDIR; give it one of its own.
    scratch = tempfile.mkdtemp(prefix="agent-eval-chromium-")
    os.environ["TMPDIR"] = scratch
    driver = None
    results = {}
    try:
        driver = browser()
        for spec in sys.argv[2:]:
            kind, _, rest = spec.partition("=")
            page, *arguments = rest.split(",")
            check = CHECKS[kind]
            try:
                seen = check(driver, page, arguments[0], int(arguments[1])) if kind == "run" else check(driver, page, *arguments)
            except Exception as error:  # the test reports what failed, with the page
                seen = {"error": "%s: %s" % (type(error).__name__, error)}
            driver.execute_script("window.scrollTo(0, 0)")
            driver.save_screenshot(os.path.join(shots, kind + ".png"))
            results[kind] = seen
    finally:
        if driver is not None:
            driver.quit()
        shutil.rmtree(scratch, ignore_errors=True)
    json.dump(results, sys.stdout, indent=1, sort_keys=True)
    print()


if __name__ == "__main__":
    main()
