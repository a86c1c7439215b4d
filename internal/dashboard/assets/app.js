// The OpenFief dashboard's only script (OF-12). It follows the server's
// event stream and redraws the table or the plugin's page from JSON. Every
// value is set with textContent, never parsed as HTML: what a vendor wrote
// stays text.
"use strict";

(function () {
  var body = document.body;
  var page = body.dataset.page;
  var live = document.getElementById("live");
  // Paths are relative to the page's root, /TOKEN/ (the server says how
  // to get there from this page): the token stays in the address only.
  var root = body.dataset.root === "../" ? "../" : "./";

  function el(tag, text, cls) {
    var e = document.createElement(tag);
    if (text !== undefined && text !== null) e.textContent = text;
    if (cls) e.className = cls;
    return e;
  }

  function toneClass(tone) {
    // Tones come from a fixed set on the server; anything else is dropped.
    return /^[a-z]+$/.test(tone || "") ? "tone-" + tone : "";
  }

  function copyButton(value, label, ariaLabel) {
    var b = el("button", label, "copy");
    b.type = "button";
    if (ariaLabel) b.setAttribute("aria-label", ariaLabel);
    b.dataset.copy = value;
    return b;
  }

  function cell(c) {
    var td = el("td", null, toneClass(c.tone));
    if (c.title) td.title = c.title;
    td.appendChild(el("span", c.text, "main"));
    if (c.detail) td.appendChild(el("span", c.detail, "sub"));
    if (c.copy) td.appendChild(copyButton(c.copy, "Copy", "Copy the full image reference"));
    return td;
  }

  // focused remembers which control of which row has the keyboard focus,
  // so a redraw does not take it away.
  function focused() {
    var a = document.activeElement;
    var tr = a && a.closest ? a.closest("tr[data-name]") : null;
    return tr ? { name: tr.dataset.name, copy: a.classList.contains("copy") } : null;
  }

  function refocus(f) {
    if (!f) return;
    Array.prototype.forEach.call(document.querySelectorAll("#plugins tbody tr"), function (tr) {
      if (tr.dataset.name !== f.name) return;
      var target = tr.querySelector(f.copy ? "button.copy" : "a");
      if (target) target.focus();
    });
  }

  function renderTable(t) {
    var keep = focused();
    var tbody = document.querySelector("#plugins tbody");
    var rows = document.createDocumentFragment();
    t.rows.forEach(function (r) {
      var tr = el("tr");
      tr.dataset.name = r.name;
      var th = el("th");
      th.scope = "row";
      var a = el("a", r.name);
      a.href = root + "plugins/" + encodeURIComponent(r.name);
      th.appendChild(a);
      tr.appendChild(th);
      r.cells.forEach(function (c) { tr.appendChild(cell(c)); });
      rows.appendChild(tr);
    });
    if (t.rows.length === 0) {
      var tr = el("tr", null, "empty");
      var td = el("td", "No plugins in this namespace.");
      td.colSpan = 7;
      tr.appendChild(td);
      rows.appendChild(tr);
    }
    tbody.replaceChildren(rows);
    refocus(keep);
  }

  function items(list) {
    var dl = el("dl");
    (list || []).forEach(function (it) {
      var div = el("div", null, "item");
      div.appendChild(el("dt", it.label));
      (it.values || []).forEach(function (v) {
        var dd = el("dd");
        if (it.pre) dd.appendChild(el("pre", v)); else dd.textContent = v;
        div.appendChild(dd);
      });
      dl.appendChild(div);
    });
    return dl;
  }

  function section(id, title) {
    var s = el("section");
    s.setAttribute("aria-labelledby", "h-" + id);
    var h = el("h2", title);
    h.id = "h-" + id;
    s.appendChild(h);
    return s;
  }

  function renderDetail(d) {
    var main = document.getElementById("detail");
    var out = document.createDocumentFragment();
    if (d.gone) {
      var p = el("p", "There is no plugin of this name (any more).", "gone");
      p.setAttribute("role", "alert");
      out.appendChild(p);
      main.replaceChildren(out);
      return;
    }
    var sum = section("summary", "Summary");
    var badge = el("p", null, ("badge " + toneClass(d.signature.tone)).trim());
    badge.appendChild(el("span", d.signature.text, "main"));
    badge.appendChild(document.createTextNode(" "));
    badge.appendChild(el("span", d.signature.detail, "sub"));
    sum.appendChild(badge);
    sum.appendChild(items(d.summary));
    out.appendChild(sum);
    d.sections.forEach(function (s) {
      var sec = section(s.id, s.title);
      if (s.note) sec.appendChild(el("p", s.note));
      if (s.items && s.items.length) sec.appendChild(items(s.items));
      if (s.id === "pending" && d.command) {
        var box = el("div", null, "command");
        var label = el("p", "Approve what is pending with:");
        label.id = "command-label";
        box.appendChild(label);
        var pre = el("pre");
        pre.setAttribute("aria-labelledby", "command-label");
        var code = el("code", d.command);
        code.id = "approve-command";
        pre.appendChild(code);
        box.appendChild(pre);
        box.appendChild(copyButton(d.command, "Copy command"));
        sec.appendChild(box);
      }
      if (s.id === "pending" && d.approve) {
        var div = el("div", null, "approve");
        var ab = el("button", "Approve all that is pending…");
        ab.type = "button";
        ab.id = "approve";
        ab.dataset.question = d.approve.question;
        ab.dataset.plugin = d.approve.plugin;
        ab.dataset.grant = d.approve.grant;
        div.appendChild(ab);
        sec.appendChild(div);
      }
      out.appendChild(sec);
    });
    var cs = section("conditions", "Conditions");
    var scroll = el("div", null, "scroll");
    scroll.setAttribute("role", "region");
    scroll.setAttribute("aria-labelledby", "conditions-caption");
    scroll.tabIndex = 0;
    var table = el("table");
    var cap = el("caption", "Status conditions with the operator's messages");
    cap.id = "conditions-caption";
    table.appendChild(cap);
    var head = el("thead");
    var hr = el("tr");
    ["Type", "Status", "Reason", "Age", "Message"].forEach(function (h) {
      var th = el("th", h);
      th.scope = "col";
      hr.appendChild(th);
    });
    head.appendChild(hr);
    table.appendChild(head);
    var tb = el("tbody");
    d.conditions.forEach(function (c) {
      var tr = el("tr");
      var th = el("th", c.type);
      th.scope = "row";
      tr.appendChild(th);
      [c.status, c.reason, c.age, c.message].forEach(function (v) { tr.appendChild(el("td", v)); });
      tb.appendChild(tr);
    });
    if (d.conditions.length === 0) {
      var tr = el("tr");
      var td = el("td", "None yet: the operator has not reconciled this plugin.");
      td.colSpan = 5;
      tr.appendChild(td);
      tb.appendChild(tr);
    }
    table.appendChild(tb);
    scroll.appendChild(table);
    cs.appendChild(scroll);
    out.appendChild(cs);
    main.replaceChildren(out);
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

  var url = root + "events";
  if (page === "plugin") url += "?plugin=" + encodeURIComponent(body.dataset.name);
  if (!window.EventSource) {
    live.textContent = "Live updates unavailable in this browser: reload to refresh.";
    return;
  }
  var source = new EventSource(url);
  source.onopen = function () { live.textContent = "Live: follows the cluster as it changes."; };
  source.onerror = function () { live.textContent = "Live updates interrupted: reconnecting…"; };
  source.onmessage = function (ev) {
    var data = JSON.parse(ev.data);
    if (page === "plugin") renderDetail(data); else renderTable(data);
    body.dataset.updates = String(Number(body.dataset.updates || "0") + 1);
  };
})();
