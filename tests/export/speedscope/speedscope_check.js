// Loads a Chrome trace-event JSON file into speedscope's own web app in
// headless Chromium and reports what speedscope made of it.
//
//   node speedscope_check.js MODULES CHROMIUM TRACE OUTDIR
//
// MODULES is the node_modules folder scripts/setup.sh filled (speedscope,
// puppeteer-core), CHROMIUM the browser binary, TRACE the file under test,
// OUTDIR where the screenshot and speedscope's own export of the profile go.
// Prints one JSON object on stdout: the importer's warnings, and for each
// profile speedscope built, its name and each frame's self and total weight
// as speedscope's "Export" button writes them. Exits non-zero on any failure.
//
// Bounded: a deadline for the whole run and a cap on the browser's resident
// memory (summed over its process tree); either kills the browser.
'use strict';

const fs = require('fs');
const http = require('http');
const os = require('os');
const path = require('path');

const DEADLINE_MS = 150000;
const STEP_MS = 60000;
const MAX_RSS_BYTES = 2 * 1024 * 1024 * 1024;

const [modules, chromium, traceFile, outDir] = process.argv.slice(2);
if (!modules || !chromium || !traceFile || !outDir) {
  console.error('usage: speedscope_check.js MODULES CHROMIUM TRACE OUTDIR');
  process.exit(2);
}
const puppeteer = require(path.join(modules, 'puppeteer-core'));
const appDir = path.join(modules, 'speedscope', 'dist', 'release');

// Serves speedscope's built app and the trace, nothing else, on loopback.
// The trace's URL name matters: speedscope picks its importer partly by file
// name, and "trace.json" is what a user's export would be called.
function serve() {
  const types = {
    '.html': 'text/html',
    '.js': 'text/javascript',
    '.css': 'text/css',
    '.json': 'application/json',
    '.wasm': 'application/wasm',
    '.png': 'image/png',
    '.woff2': 'font/woff2',
  };
  const server = http.createServer((req, res) => {
    const url = new URL(req.url, 'http://127.0.0.1');
    let file = null;
    if (url.pathname === '/trace.json') {
      file = traceFile;
    } else {
      const name = path.basename(url.pathname === '/' ? '/index.html' : url.pathname);
      const candidate = path.join(appDir, name);
      if (fs.existsSync(candidate)) file = candidate;
    }
    if (!file) {
      res.writeHead(404);
      res.end();
      return;
    }
    res.writeHead(200, {'Content-Type': types[path.extname(file)] || 'application/octet-stream'});
    fs.createReadStream(file).pipe(res);
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve(server));
  });
}

// Memory of a process and all its descendants, from /proc: the sum of their
// proportional set sizes (shared pages counted once overall, unlike RSS).
function treeRss(root) {
  const children = new Map();
  for (const d of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${d}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (!children.has(ppid)) children.set(ppid, []);
      children.get(ppid).push(Number(d));
    } catch (e) {
      // The process exited while we looked.
    }
  }
  let total = 0;
  const todo = [root];
  while (todo.length) {
    const pid = todo.pop();
    try {
      const m = /\nPss:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8'));
      if (m) total += Number(m[1]) * 1024;
    } catch (e) {
      continue;
    }
    for (const c of children.get(pid) || []) todo.push(c);
  }
  return total;
}

// Self and total weight of each frame name in an evented speedscope profile
// (time while the frame is innermost / while it is anywhere on the stack,
// recursion counted once).
function weights(profile, frames) {
  const self = {};
  const total = {};
  const stack = [];
  const depth = {};
  let last = profile.startValue;
  for (const ev of profile.events) {
    const dt = ev.at - last;
    if (stack.length) {
      const top = frames[stack[stack.length - 1]].name;
      self[top] = (self[top] || 0) + dt;
      for (const name of Object.keys(depth)) {
        if (depth[name] > 0) total[name] = (total[name] || 0) + dt;
      }
    }
    last = ev.at;
    const name = frames[ev.frame].name;
    if (ev.type === 'O') {
      stack.push(ev.frame);
      depth[name] = (depth[name] || 0) + 1;
    } else {
      stack.pop();
      depth[name] -= 1;
    }
  }
  return {self, total, open_at_end: stack.length};
}

async function main() {
  fs.mkdirSync(outDir, {recursive: true});
  const server = await serve();
  const port = server.address().port;
  const userDir = fs.mkdtempSync(path.join(os.tmpdir(), 'flightrec-chromium-'));
  const args = [
    `--user-data-dir=${userDir}`,
    '--disable-dev-shm-usage',
    '--no-first-run',
    '--no-default-browser-check',
    '--disable-extensions',
    '--disable-background-networking',
    '--disable-component-update',
    '--disable-sync',
    '--renderer-process-limit=1',
    // speedscope draws with WebGL; headless Chromium without a GPU gets it
    // from SwiftShader only when asked.
    '--use-angle=swiftshader',
    '--enable-unsafe-swiftshader',
    '--js-flags=--max-old-space-size=1024',
    '--window-size=1600,900',
  ];
  // Chromium's sandbox refuses to start as root (CI runs the tests as root);
  // the page it loads is speedscope's own app and a file we just wrote,
  // served on loopback, so running it unsandboxed there exposes nothing.
  if (process.getuid() === 0) args.push('--no-sandbox');
  const browser = await puppeteer.launch({
    executablePath: chromium,
    headless: true,
    args,
    timeout: STEP_MS,
    protocolTimeout: STEP_MS,
    defaultViewport: {width: 1600, height: 900},
  });
  const browserPid = browser.process().pid;
  let failure = null;
  let peakRss = 0;
  const kill = (why) => {
    failure = failure || why;
    try {
      process.kill(browserPid, 'SIGKILL');
    } catch (e) {
      // Already gone.
    }
  };
  const deadline = setTimeout(() => kill(`deadline of ${DEADLINE_MS} ms passed`), DEADLINE_MS);
  const watch = setInterval(() => {
    const rss = treeRss(browserPid);
    peakRss = Math.max(peakRss, rss);
    if (rss > MAX_RSS_BYTES) kill(`browser memory (PSS) ${rss} > ${MAX_RSS_BYTES} bytes`);
  }, 200);
  const messages = [];
  try {
    const page = await browser.newPage();
    page.setDefaultTimeout(STEP_MS);
    page.on('console', (m) => messages.push({type: m.type(), text: m.text()}));
    page.on('pageerror', (e) => messages.push({type: 'pageerror', text: String(e)}));
    // Keep what speedscope's Export button hands to the browser, and do not
    // let it start a download.
    await page.evaluateOnNewDocument(() => {
      const create = URL.createObjectURL.bind(URL);
      URL.createObjectURL = (blob) => {
        window.__flightrecExport = blob;
        return create(blob);
      };
      const click = HTMLAnchorElement.prototype.click;
      HTMLAnchorElement.prototype.click = function () {
        if (this.download) return;
        return click.call(this);
      };
    });
    const traceUrl = `http://127.0.0.1:${port}/trace.json`;
    await page.goto(`http://127.0.0.1:${port}/index.html#profileURL=${encodeURIComponent(traceUrl)}`);
    // Loaded: the toolbar offers Export once a profile is shown.
    await page.waitForFunction(() =>
      [...document.querySelectorAll('div')].some((d) => d.textContent === '\u2934\uFE0FExport'),
    );
    // Two pictures: the time-ordered lanes as loaded, and the Left Heavy
    // view (the stacks merged, heaviest first), which reads at a glance.
    const timeShot = path.join(outDir, 'speedscope-time-order.png');
    await page.screenshot({path: timeShot});
    // The selected tab gets speedscope's "active" class: wait for it.
    const leftHeavy = () =>
      [...document.querySelectorAll('div')].find((d) => d.textContent === '\u2B05\uFE0FLeft Heavy');
    const before = await page.evaluate(
      `(${leftHeavy})().className`,
    );
    await page.evaluate(`(${leftHeavy})().click()`);
    await page.waitForFunction(`(${leftHeavy})().className !== ${JSON.stringify(before)}`);
    // Two frames: the click's state change, then the canvas repaint.
    await page.evaluate(
      () => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))),
    );
    const shot = path.join(outDir, 'speedscope.png');
    await page.screenshot({path: shot});
    const exported = await page.evaluate(async () => {
      const tab = [...document.querySelectorAll('div')].find(
        (d) => d.textContent === '\u2934\uFE0FExport',
      );
      window.__flightrecExport = null;
      tab.click();
      const blob = window.__flightrecExport;
      return blob ? await blob.text() : null;
    });
    if (!exported) throw new Error('speedscope exported nothing');
    const exportFile = path.join(outDir, 'trace.speedscope.json');
    fs.writeFileSync(exportFile, exported);
    const file = JSON.parse(exported);
    const frames = file.shared.frames;
    const profiles = file.profiles.map((p) => ({
      name: p.name,
      type: p.type,
      unit: p.unit,
      span: p.endValue - p.startValue,
      ...weights(p, frames),
    }));
    const out = {
      screenshot: shot,
      screenshot_time_order: timeShot,
      export: exportFile,
      frames: frames.map((f) => f.name),
      profiles,
      messages,
      peak_pss_bytes: peakRss,
    };
    process.stdout.write(JSON.stringify(out) + '\n');
  } catch (e) {
    failure = failure || String(e && e.stack ? e.stack : e);
    process.stderr.write(JSON.stringify(messages.slice(0, 50)) + '\n');
  } finally {
    clearTimeout(deadline);
    clearInterval(watch);
    await Promise.race([browser.close(), new Promise((r) => setTimeout(r, 5000))]).catch(() => {});
    kill(failure);
    server.close();
    fs.rmSync(userDir, {recursive: true, force: true});
  }
  if (failure) {
    process.stderr.write(`speedscope_check: ${failure}\n`);
    process.exit(1);
  }
}

main().catch((e) => {
  process.stderr.write(`speedscope_check: ${e && e.stack ? e.stack : e}\n`);
  process.exit(1);
});
