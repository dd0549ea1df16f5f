// Shale's web console: one page over the same HTTP API any client uses (S2's v1 REST
// API, the tracked-consumer and table-status extensions, /metrics), with the caller's
// token. Pages are chosen by the URL's hash; each page's timers and live reads end when
// another page is shown. This file: the state, DOM helpers, API calls, record bytes and
// the token; charts.js draws, pages.js builds the pages. Loaded last: it starts the page.
'use strict';

const SAMPLE_MS = 2000;         // how often charts and tails are refreshed
const CHART_POINTS = 90;        // three minutes of samples at SAMPLE_MS
const PAGE_SIZE = 100;          // names per page of a list
const LIVE_ROWS = 200;          // records kept in a live tail's view

const state = {
  process: null,                // /console/process.json
  session: null,                // /console/session
  token: sessionStorage.getItem('shale.token') || '',
  page: null,                   // what the current page started: { timers, aborts }
};

// ---------- DOM helpers ----------

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith('on')) node.addEventListener(key.slice(2), value);
    else if (key === 'text') node.textContent = value;
    else node.setAttribute(key, value === true ? '' : value);
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function show(...nodes) {
  const main = document.getElementById('main');
  main.replaceChildren(...nodes);
}

function notice(message, kind) {
  const box = document.getElementById('notice');
  box.className = kind || 'info';
  box.textContent = message;
  if (message) setTimeout(() => { if (box.textContent === message) box.textContent = ''; }, 6000);
}

function fmtNumber(n) {
  if (n === undefined || n === null || Number.isNaN(n)) return '–';
  return Number(n).toLocaleString('en-US', { maximumFractionDigits: 2 });
}

function fmtBytes(n) {
  if (n === undefined || n === null || Number.isNaN(n)) return '–';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (Math.abs(n) >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return `${n.toFixed(i === 0 ? 0 : 1)} ${units[i]}`;
}

function fmtTime(ms) {
  return ms ? new Date(Number(ms)).toISOString().replace('T', ' ').replace('Z', '') : '–';
}

// ---------- the API ----------

class ApiFailure extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

async function api(path, options = {}) {
  const headers = Object.assign({}, options.headers || {});
  if (state.token) headers.authorization = `Bearer ${state.token}`;
  if (options.basin) headers['s2-basin'] = options.basin;
  let body;
  if (options.json !== undefined) {
    headers['content-type'] = 'application/json';
    body = JSON.stringify(options.json);
  }
  const response = await fetch(path, { method: options.method || 'GET', headers, body, signal: options.signal });
  if (options.raw) return response;
  const text = await response.text();
  let parsed = null;
  try { parsed = text ? JSON.parse(text) : null; } catch (_) { parsed = text; }
  if (!response.ok) {
    const code = parsed && parsed.code ? parsed.code : String(response.status);
    const message = parsed && parsed.message ? parsed.message : String(text || response.statusText);
    if (response.status === 401) askForToken(`Refused: ${message}`);
    throw new ApiFailure(response.status, code, message);
  }
  return parsed;
}

function streamPath(stream, rest = '') {
  return `/v1/streams/${encodeURIComponent(stream)}${rest}`;
}

function can(operation) {
  return !!(state.session && state.session.operations.includes(operation));
}

// Runs `action`, showing its failure as a notice instead of losing it.
async function attempt(action, done) {
  try {
    await action();
    if (done) notice(done, 'ok');
  } catch (e) {
    notice(e instanceof ApiFailure ? `${e.code}: ${e.message}` : String(e), 'error');
  }
}

// ---------- record bytes ----------

function fromBase64(text) {
  const raw = atob(text || '');
  const bytes = new Uint8Array(raw.length);
  for (let i = 0; i < raw.length; i++) bytes[i] = raw.charCodeAt(i);
  return bytes;
}

function toBase64(bytes) {
  let raw = '';
  for (const b of bytes) raw += String.fromCharCode(b);
  return btoa(raw);
}

function renderBytes(base64, format) {
  const bytes = fromBase64(base64);
  if (format === 'hex') {
    return Array.from(bytes.slice(0, 512), (b) => b.toString(16).padStart(2, '0')).join(' ')
      + (bytes.length > 512 ? ` … (${bytes.length} bytes)` : '');
  }
  const text = new TextDecoder('utf-8', { fatal: false }).decode(bytes);
  if (format === 'json') {
    try { return JSON.stringify(JSON.parse(text), null, 2); } catch (_) { return text; }
  }
  return text;
}

// ---------- the token ----------

function askForToken(reason) {
  const dialog = document.getElementById('token-dialog');
  document.getElementById('token-reason').textContent = reason || 'Paste an access token.';
  if (!dialog.open) dialog.showModal();
  document.getElementById('token-input').focus();
}

async function loadSession() {
  if (!state.process.client_api) {
    state.session = { auth: false, token: null, operations: [] };
    return true;
  }
  try {
    state.session = await api('/console/session');
    document.getElementById('token-button').textContent = state.session.token ? `Token: ${state.session.token}` : 'Token';
    return true;
  } catch (e) {
    state.session = { auth: true, token: null, operations: [] };
    return false;
  }
}

async function start() {
  state.process = await fetch('/console/process.json').then((r) => r.json());
  document.getElementById('process').textContent = `${state.process.role} · ${state.process.version}`;
  document.getElementById('token-form').addEventListener('submit', async () => {
    state.token = document.getElementById('token-input').value.trim();
    sessionStorage.setItem('shale.token', state.token);
    document.getElementById('token-input').value = '';
    if (await loadSession()) route();
  });
  document.getElementById('token-clear').addEventListener('click', () => {
    state.token = '';
    sessionStorage.removeItem('shale.token');
    document.getElementById('token-dialog').close();
    loadSession().then(route);
  });
  document.getElementById('token-button').addEventListener('click', () => askForToken());
  document.addEventListener('keydown', (e) => {
    if (e.key === '/' && !['INPUT', 'TEXTAREA', 'SELECT'].includes(document.activeElement.tagName)) {
      const search = document.querySelector('input[type=search]');
      if (search) { e.preventDefault(); search.focus(); }
    }
  });
  window.addEventListener('hashchange', route);
  if (await loadSession()) route();
}

start();
