"""Uses `agent-eval serve`'s pages in headless Chromium (Debian's, through chromium-driver and
Selenium) as a person would, while Tests/CLITests/ServeBrowserTests.swift changes what they show,
and prints what it saw as JSON. The two sides meet through files in SIGNALS: this script writes
a file when it has reached a point, and waits for the test's files.

    python serve_browser.py SHOTS SIGNALS SCENARIO BASE_URL [ARG...]

SCENARIO is one of:
  live BASE LOGNAME        the runs list open: the run whose log ends in LOGNAME appears in it
                           without a reload (writes list-open, reads started), then its page
                           fills in live until it stops
  reconnect BASE LOG       a run's page open while its log grows; the server goes away and comes
                           back (writes seen, waits for the test); the page reconnects and goes
                           on from where it was
  approve BASE             two windows on the approvals page press Approve at the same moment
  pages BASE HOSTILE_LOG CASE   filters and links round-trip, compare, a suite's report and a
                           case's history linked to run pages, planted markup stays text
  long BASE LOG            a long run's page: drawn with its first steps, the rest coming as
                           outlines; the last step's events fetched when the reader jumps there

Exits 1 with a message when Chromium or its driver is missing (scripts/python_venv browser
installs them).
"""

import json
import os
import shutil
import sys
import tempfile
import time
import urllib.parse

import chromium_driver
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import WebDriverWait


def browser():
    return chromium_driver.browser("serve_browser")


def wait(driver, condition, timeout=60, what="the page"):
    try:
        return WebDriverWait(driver, timeout, poll_frequency=0.05).until(condition)
    except Exception:
        raise RuntimeError("%s: not within %d s; the console said: %s; the page says: %s" % (
            what, timeout, severe_logs(driver), driver.execute_script("return document.body ? document.body.innerText.slice(0, 400) : ''")))


def load(driver, url, timeout=30):
    driver.get(url)
    wait(driver, lambda d: d.execute_script("return document.body && document.body.dataset.ready"), timeout, "drawing " + url)
    state = driver.execute_script("return document.body.dataset.ready")
    if state != "true":
        raise RuntimeError("the page failed to draw: %s" % driver.execute_script("return document.getElementById('app').textContent"))


def dataset(driver, name):
    return driver.execute_script("return document.body.dataset[arguments[0]]", name)


def severe_logs(driver):
    return chromium_driver.severe_logs(driver)


def signal(signals, name):
    with open(os.path.join(signals, name), "w") as handle:
        handle.write(str(time.time()))


def await_signal(signals, name, timeout=120):
    path = os.path.join(signals, name)
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise RuntimeError("the test never wrote " + name)
        time.sleep(0.05)
    with open(path) as handle:
        return float(handle.read() or "0")


def live_sequences(driver):
    """The sequence numbers of the events the open run page holds, in order."""
    return driver.execute_script(
        "const live = window.agentEvalLive; if (!live) return null;"
        "const seqs = []; for (const step of live.doc.steps || []) for (const event of step.events || []) seqs.push(event.seq);"
        "return seqs;")


def watch_states(driver, until, timeout=120):
    """The run states the page showed, in order, until it shows `until`."""
    states = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        state = dataset(driver, "liveState")
        if state and (not states or states[-1] != state):
            states.append(state)
        if state == until:
            return states
        time.sleep(0.02)
    raise RuntimeError("the page never showed %s (it showed %s)" % (until, states))


def scenario_live(driver, signals, base, logname):
    load(driver, base)
    signal(signals, "list-open")
    started = await_signal(signals, "started")
    selector = "tr.run-row[data-path$='%s']" % logname
    wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR, selector), 60, "the new run in the list")
    seen = {"appeared_seconds": time.time() - started, "reloads": driver.execute_script("return performance.getEntriesByType('navigation').length")}
    # The list is drawn again as the run grows: click the row as it is now.
    driver.execute_script("document.querySelector(arguments[0]).click()", selector + " a.run-link")
    wait(driver, lambda d: d.execute_script("return document.body.dataset.view === 'run' && !!document.body.dataset.liveState"), 30, "the run page")
    seen["states"] = watch_states(driver, "stopped")
    seen["status_text"] = driver.find_element(By.ID, "live-status").text
    seen["sequences"] = live_sequences(driver)
    seen["steps"] = int(dataset(driver, "liveSteps"))
    seen["updates"] = int(dataset(driver, "liveUpdates"))
    seen["severe_console"] = severe_logs(driver)
    return seen


def scenario_reconnect(driver, signals, base, log):
    load(driver, base + "run?log=" + urllib.parse.quote(log, safe=""))
    wait(driver, lambda d: int(dataset(d, "liveSteps") or 0) >= 4, 60, "step 3 on the page")
    seen = {"before": live_sequences(driver)}
    signal(signals, "seen")
    wait(driver, lambda d: dataset(d, "liveConnected") == "false", 60, "the page noticing the server left")
    wait(driver, lambda d: dataset(d, "liveConnected") == "true", 60, "the page reconnecting")
    seen["states"] = watch_states(driver, "stopped")
    seen["after"] = live_sequences(driver)
    seen["severe_console"] = [line for line in severe_logs(driver) if "events/run" not in line]
    return seen


def scenario_approve(drivers, signals, base):
    for driver in drivers:
        deadline = time.monotonic() + 60
        while True:
            load(driver, base + "approvals")
            if dataset(driver, "approvals") == "1":
                break
            if time.monotonic() > deadline:
                raise RuntimeError("no call waited on the approvals page")
            time.sleep(0.3)
        driver.find_element(By.CSS_SELECTOR, ".approvals input.reason").send_keys("checked in the browser")
    # Both press Approve, one straight after the other: their requests race at the server.
    for driver in drivers:
        driver.execute_script("document.querySelector('.approvals button.approve').click()")
    outcomes = []
    for driver in drivers:
        wait(driver, lambda d: d.execute_script("const o = document.querySelector('.approvals .outcome'); return o && o.dataset.status"), 30, "an answer")
        outcomes.append(driver.execute_script(
            "const o = document.querySelector('.approvals .outcome'); return [Number(o.dataset.status), o.textContent]"))
    return {"outcomes": outcomes, "severe_console": [line for driver in drivers for line in severe_logs(driver) if "409" not in line]}


def scenario_pages(driver, signals, base, hostile, case_id):
    seen = {}
    load(driver, base + "?tool=refund_order")
    seen["tool_field"] = driver.find_element(By.CSS_SELECTOR, "#filters input[name=tool]").get_attribute("value")
    seen["refund_rows"] = len(driver.find_elements(By.CSS_SELECTOR, "tr.run-row"))
    agent = driver.find_element(By.CSS_SELECTOR, "#filters input[name=agent]")
    agent.send_keys("support-*")
    driver.find_element(By.CSS_SELECTOR, "#filters button[type=submit]").click()
    wait(driver, lambda d: "agent=" in d.current_url and d.execute_script("return document.body.dataset.ready") == "true", 30, "the filtered list")
    seen["filtered_url"] = driver.current_url[len(base) - 1:]
    seen["filtered_rows"] = len(driver.find_elements(By.CSS_SELECTOR, "tr.run-row"))
    driver.back()
    wait(driver, lambda d: "agent=" not in d.current_url and d.execute_script("return document.body.dataset.ready") == "true", 30, "back")
    seen["back_url"] = driver.current_url[len(base) - 1:]
    # Two runs picked, compared.
    load(driver, base)
    for name in ("before.jsonl.gz", "after.jsonl.gz"):
        driver.find_element(By.CSS_SELECTOR, "tr.run-row[data-path$='/%s'] input[type=checkbox]" % name).click()
    driver.find_element(By.ID, "compare-link").click()
    wait(driver, lambda d: d.execute_script("return document.body.dataset.ready === 'true' && document.body.dataset.view === 'diff'"), 30, "the compare page")
    seen["compare_first_row"] = driver.execute_script(
        "const r = document.querySelector('table.diff-rows tr.first'); return r ? Number(r.dataset.row) : null")
    seen["compare_banner"] = driver.find_element(By.ID, "first-divergence").text if driver.find_elements(By.ID, "first-divergence") else None
    # Planted markup in a run, its list row and its page: text, never run.
    load(driver, base + "?text=hostile")
    seen["hostile_rows"] = len(driver.find_elements(By.CSS_SELECTOR, "tr.run-row"))
    seen["pwned_list"] = driver.execute_script("return window.__pwned === undefined ? null : window.__pwned")
    seen["planted_agent_shown"] = driver.execute_script(
        "return document.getElementById('runs').textContent.includes('<script>window.__pwned')")
    load(driver, base + "run?log=" + urllib.parse.quote(hostile, safe=""))
    driver.execute_script("document.querySelectorAll('details').forEach(d => { d.open = true; d.dispatchEvent(new Event('toggle')); })")
    seen["pwned"] = driver.execute_script("return window.__pwned === undefined ? null : window.__pwned")
    seen["planted_text_shown"] = driver.execute_script(
        "return document.getElementById('app').textContent.includes('<script>window.__pwned')")
    seen["images"] = len(driver.find_elements(By.TAG_NAME, "img"))
    # A suite run's report: its failure links lead to the run's page at the step.
    load(driver, base + "suites")
    seen["suite_rows"] = len(driver.find_elements(By.CSS_SELECTOR, "tr.suite-row"))
    driver.find_element(By.CSS_SELECTOR, "a.suite-link").click()
    wait(driver, lambda d: d.execute_script("return document.body.dataset.ready === 'true' && document.body.dataset.view === 'report'"), 30, "the suite's report")
    links = driver.execute_script("return Array.from(document.querySelectorAll('a.failure-link')).map(a => a.getAttribute('href'))")
    seen["failure_links"] = links
    if links:
        driver.execute_script("document.querySelector('a.failure-link').click()")
        wait(driver, lambda d: d.execute_script("return document.body.dataset.ready === 'true' && document.body.dataset.view === 'run'"), 30, "the failure's run")
        wait(driver, lambda d: d.execute_script("return document.body.dataset.currentStep !== undefined"), 10, "the failure's step")
        seen["failure_step"] = int(dataset(driver, "currentStep"))
    load(driver, base + "case?id=" + urllib.parse.quote(case_id, safe=""))
    seen["case_history_rows"] = len(driver.find_elements(By.CSS_SELECTOR, "#history tbody tr"))
    seen["case_last_failure"] = bool(driver.find_elements(By.ID, "last-failure"))
    seen["severe_console"] = severe_logs(driver)
    return seen


def scenario_long(driver, signals, base, log):
    start = time.monotonic()
    load(driver, base + "run?log=" + urllib.parse.quote(log, safe=""), timeout=120)
    # Drawn with its first steps; the others come over the page's stream, as outlines.
    seen = {"first_paint_seconds": time.monotonic() - start, "first_state": dataset(driver, "liveFirstState"),
            "first_steps": int(dataset(driver, "liveFirstSteps") or 0)}
    wait(driver, lambda d: dataset(d, "liveState") not in (None, "loading"), 120, "the rest of the steps")
    seen["load_seconds"] = time.monotonic() - start
    seen["state"] = dataset(driver, "liveState")
    seen["steps"] = int(driver.execute_script("return document.querySelector('.run-view').dataset.steps"))
    seen["cards_drawn"] = len(driver.find_elements(By.CSS_SELECTOR, "section.step"))
    last = int(driver.execute_script("return Number(document.querySelector('.run-view').dataset.lastStep)"))
    seen["last_step"] = last
    start = time.monotonic()
    driver.find_element(By.TAG_NAME, "body").send_keys("g")
    driver.switch_to.active_element.send_keys(str(last), Keys.ENTER)
    wait(driver, lambda d: d.find_elements(By.ID, "step-%d" % last), 60, "the last step's card")
    seen["jump_seconds"] = time.monotonic() - start
    seen["fetched"] = int(dataset(driver, "stepsFetched") or 0)
    seen["last_card_events"] = len(driver.find_elements(By.CSS_SELECTOR, "#step-%d .event" % last))
    seen["severe_console"] = severe_logs(driver)
    return seen


def main():
    if len(sys.argv) < 5:
        sys.exit(__doc__)
    shots, signals, scenario, base = sys.argv[1:5]
    arguments = sys.argv[5:]
    os.makedirs(shots, exist_ok=True)
    scratch = tempfile.mkdtemp(prefix="agent-eval-chromium-")
    os.environ["TMPDIR"] = scratch
    drivers = []
    try:
        drivers.append(browser())
        if scenario == "approve":
            drivers.append(browser())
            seen = scenario_approve(drivers, signals, base)
        else:
            seen = {"live": scenario_live, "reconnect": scenario_reconnect, "pages": scenario_pages, "long": scenario_long}[scenario](
                drivers[0], signals, base, *arguments)
        drivers[0].save_screenshot(os.path.join(shots, "serve-" + scenario + ".png"))
    except Exception as error:  # the test reports what failed
        seen = {"error": "%s: %s" % (type(error).__name__, error)}
    finally:
        for driver in drivers:
            driver.quit()
        shutil.rmtree(scratch, ignore_errors=True)
    json.dump(seen, sys.stdout, indent=1, sort_keys=True)
    print()


if __name__ == "__main__":
    main()
