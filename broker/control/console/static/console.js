// minikafka console: live fragments over Server-Sent Events, fault forms as JSON.
// No build step, no library. The server sends a page's live part at most a few times
// a second, only when it changed; focus inside it is kept across updates.
"use strict";

(function () {
  const live = document.getElementById("live");
  const status = document.getElementById("live-status");

  function focusKey(el) {
    if (!el || !live.contains(el)) return null;
    return el.id ? "#" + CSS.escape(el.id) : el.getAttribute("href") ? 'a[href="' + el.getAttribute("href") + '"]' : null;
  }

  function connect() {
    const page = location.pathname + location.search;
    const source = new EventSource("/console/events?page=" + encodeURIComponent(page));
    source.addEventListener("live", function (event) {
      const key = focusKey(document.activeElement);
      live.innerHTML = event.data;
      if (key) {
        const again = live.querySelector(key);
        if (again) again.focus();
      }
      status.textContent = "Live: updated " + new Date().toLocaleTimeString();
      document.body.dataset.updates = String(Number(document.body.dataset.updates || 0) + 1);
    });
    source.onopen = function () { status.textContent = "Live: connected"; };
    source.onerror = function () { status.textContent = "Live: reconnecting…"; };
  }

  function token() {
    const meta = document.querySelector('meta[name="minikafka-token"]');
    if (meta) return meta.content;
    const input = document.getElementById("token-input");
    return input ? input.value.trim() : "";
  }

  function body(form) {
    const out = {};
    let path = form.dataset.path;
    const values = {};
    for (const el of form.elements) { if (el.name) values[el.name] = el.value; }
    for (const el of form.elements) {
      if (!el.name || el.value === "") continue;
      if (el.dataset.when) {
        const [name, wanted] = el.dataset.when.split("=");
        if (values[name] !== wanted) continue;
      }
      if (path.includes("{" + el.name + "}")) {
        path = path.replace("{" + el.name + "}", encodeURIComponent(el.value));
        if (el.dataset.pathOnly !== undefined) continue;
      }
      out[el.name] = el.dataset.int !== undefined ? Number(el.value) : el.value;
    }
    return { path: path, json: out };
  }

  async function submit(event) {
    event.preventDefault();
    const form = event.currentTarget;
    const result = document.getElementById("fault-status");
    const { path, json } = body(form);
    const button = form.querySelector("button");
    result.textContent = (button ? button.textContent : form.dataset.method) + ": sending…";
    try {
      const response = await fetch(path, {
        method: form.dataset.method,
        headers: { "Content-Type": "application/json", "Authorization": "Bearer " + token() },
        body: JSON.stringify(json),
      });
      const answer = await response.json();
      result.textContent = response.ok
        ? (button ? button.textContent : "Done") + ": done " + JSON.stringify(answer)
        : "Refused (" + response.status + "): " + answer.error;
      result.className = response.ok ? "ok" : "error";
    } catch (err) {
      result.textContent = "Could not reach the control endpoint: " + err;
      result.className = "error";
    }
  }

  for (const form of document.querySelectorAll("form.fault")) form.addEventListener("submit", submit);
  if (live) connect();
})();
