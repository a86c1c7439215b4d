// The OpenFief dashboard's only script (OF-12, OF-21). It renders nothing
// itself: the server renders every view with its templates, the first page
// whole and, on the event stream, the page's live part (the element marked
// data-live) again after each change. This script puts that markup in
// place, keeps the keyboard focus where it was, and runs the Copy and
// Approve buttons. The markup is parsed with DOMParser into a document of
// its own, where nothing runs or loads, and only then moved into the page.
"use strict";

(function () {
  var body = document.body;
  var page = body.dataset.page;
  var live = document.getElementById("live");
  var region = document.querySelector("[data-live]");
  // Paths are relative to the page's root, /TOKEN/ (the server says how
  // to get there from this page): the token stays in the address only.
  var root = body.dataset.root === "../" ? "../" : "./";

  // focusKey names the control in the live part that has the keyboard
  // focus, as a selector that finds it again in the redrawn part: by its
  // id, or by its row and kind in the table; null when the focus is
  // elsewhere.
  function focusKey() {
    var a = document.activeElement;
    if (!a || a === region || !region.contains(a)) return null;
    if (a.id) return "#" + CSS.escape(a.id);
    var tr = a.closest("tr[data-name]");
    if (tr) return 'tr[data-name="' + CSS.escape(tr.dataset.name) + '"] ' + (a.matches("button.copy") ? "button.copy" : "a");
    return null;
  }

  // swap replaces the live part with the server's markup.
  function swap(markup) {
    var key = focusKey();
    var parsed = new DOMParser().parseFromString(markup, "text/html");
    var part = document.createDocumentFragment();
    while (parsed.body.firstChild) part.appendChild(parsed.body.firstChild);
    region.replaceChildren(part);
    if (key) {
      var target = region.querySelector(key);
      if (target) target.focus();
    }
  }

  // approve asks the owner to confirm, then posts the approval with the
  // versions the page showed; the server refuses it if they changed.
  function approve(b) {
    var result = document.getElementById("approve-result");
    if (!window.confirm(b.dataset.question)) {
      result.textContent = "Not approved.";
      return;
    }
    b.disabled = true;
    result.textContent = "Approving…";
    fetch(root + "plugins/" + encodeURIComponent(body.dataset.name) + "/approve", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ plugin: b.dataset.plugin, grant: b.dataset.grant }),
      credentials: "omit",
    }).then(function (resp) {
      return resp.json().then(function (a) { result.textContent = (resp.ok ? "" : "Refused: ") + a.message; });
    }, function () {
      result.textContent = "Refused: the dashboard could not be reached.";
    }).then(function () { b.disabled = false; });
  }

  document.addEventListener("click", function (ev) {
    var ab = ev.target.closest ? ev.target.closest("button#approve") : null;
    if (ab) {
      approve(ab);
      return;
    }
    var b = ev.target.closest ? ev.target.closest("button.copy") : null;
    if (!b) return;
    var done = function (msg) { b.textContent = msg; };
    if (navigator.clipboard && navigator.clipboard.writeText) {
      navigator.clipboard.writeText(b.dataset.copy).then(function () { done("Copied"); }, function () { done("Copy failed: select the text"); });
    } else {
      done("Copy unavailable: select the text");
    }
  });

  if (!window.EventSource || !window.DOMParser || !region) {
    live.textContent = "Live updates unavailable in this browser: reload to refresh.";
    return;
  }
  var url = root + "events";
  if (page === "plugin") url += "?plugin=" + encodeURIComponent(body.dataset.name);
  if (page === "removed") url += "?removed=" + encodeURIComponent(body.dataset.key);
  live.textContent = "Live updates: connecting…";
  var source = new EventSource(url);
  source.onopen = function () { live.textContent = "Live: follows the cluster as it changes."; };
  source.onerror = function () { live.textContent = "Live updates interrupted: reconnecting…"; };
  source.onmessage = function (ev) {
    var data = JSON.parse(ev.data);
    if (typeof data.html !== "string") return;
    swap(data.html);
    body.dataset.updates = String(Number(body.dataset.updates || "0") + 1);
  };
})();
