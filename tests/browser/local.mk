# SPDX-License-Identifier: MIT
# tests/browser: the dashboard and the browser-facing API in Debian's
# headless Chromium, driven by playwright-core from npm (package.json and
# package-lock.json here; scripts/setup.sh installs chromium and node and
# runs `npm ci`). Each .py starts pulsed through tests/integration/
# pulsetest.py and runs one .mjs under node. Tests that need a feature this
# pulsed lacks (Server-Sent Events, CORS) exit 77, SKIP, saying which.
BROWSER_TESTS = \
	tests/browser/10_dashboard.py \
	tests/browser/20_live_tail.py \
	tests/browser/30_cors.py \
	tests/browser/40_sse_resume.py

TESTS += $(BROWSER_TESTS)
EXTRA_DIST += $(BROWSER_TESTS) tests/browser/browsertest.py tests/browser/lib.mjs \
	tests/browser/dashboard.mjs tests/browser/live_tail.mjs tests/browser/cors.mjs \
	tests/browser/sse_resume.mjs tests/browser/package.json tests/browser/package-lock.json

# 10_dashboard.py leaves its screenshots in the build tree, so make check
# never writes into the sources; `make screenshots` runs it (a missing
# browser is then an error, not a skip) and copies them into docs/.
PULSE_SCREENSHOTS = dashboard-laptop.png dashboard-phone.png
screenshots: pulsed
	rm -rf tests/browser/screenshots
	PULSE_REQUIRE_BROWSER=1 $(MAKE) $(AM_MAKEFLAGS) check TESTS=tests/browser/10_dashboard.py
	for f in $(PULSE_SCREENSHOTS); do cp tests/browser/screenshots/$$f $(srcdir)/docs/$$f || exit 1; done
.PHONY: screenshots

clean-local: clean-browser-screenshots
clean-browser-screenshots:
	rm -rf tests/browser/screenshots
.PHONY: clean-browser-screenshots
