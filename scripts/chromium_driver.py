"""Debian's headless Chromium through chromium-driver and Selenium, as the browser tests drive it
(scripts/viewer_browser.py, scripts/serve_browser.py)."""

import shutil
import sys

from selenium import webdriver
from selenium.webdriver.chrome.service import Service


def browser(name, *extra_flags):
    """A headless Chromium; exits 1 naming `name` when Chromium or its driver is missing."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    if not chromium or not driver:
        sys.exit("%s: Chromium and chromium-driver are needed (apt-get install chromium chromium-driver, "
                 "or scripts/python_venv browser)" % name)
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--window-size=1400,1000", "--no-first-run") + extra_flags:
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(executable_path=driver), options=options)


def severe_logs(driver):
    """What the page's console said at level SEVERE."""
    return [entry["message"] for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]
