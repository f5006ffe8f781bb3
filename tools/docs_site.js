// The docs site's script (tools/build_docs.py copies it to site.js): the search box and the sidebar toggle for narrow
// screens. No library, no network: the search index is search.js (Quarto's search.json entries as a script, so it loads
// from file:// too), fetched the first time the search box gets focus.
(function () {
  'use strict';
  var index = null, waiting = [];

  function loadIndex(then) {
    if (index) return then();
    waiting.push(then);
    if (waiting.length > 1) return;
    var s = document.createElement('script');
    s.src = 'search.js';
    s.onload = function () { index = window.SEARCH_INDEX || []; waiting.splice(0).forEach(function (f) { f(); }); };
    document.head.appendChild(s);
  }

  function terms(q) { return q.toLowerCase().match(/[\w@.-]+/g) || []; }

  // Every term must occur in the entry; a term that is the section's name (or a word of it) counts most, then the
  // page title, then the text. Ties keep the site's order.
  function score(e, ts) {
    var sec = (e.section || '').toLowerCase(), title = e.title.toLowerCase(), text = (e.text || '').toLowerCase(), s = 0;
    for (var i = 0; i < ts.length; i++) {
      var t = ts[i], words = new RegExp('(^|[^\\w])' + t.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'));
      if (sec === t) s += 20; else if (words.test(sec)) s += 8; else if (sec.indexOf(t) >= 0) s += 4;
      if (title === t) s += 10; else if (words.test(title)) s += 5;
      if (words.test(text)) s += 2; else if (text.indexOf(t) >= 0) s += 1;
      if (sec.indexOf(t) < 0 && title.indexOf(t) < 0 && text.indexOf(t) < 0) return 0;
    }
    return s;
  }

  function search(q) {
    var ts = terms(q);
    if (!ts.length) return [];
    var hits = [];
    index.forEach(function (e, i) { var s = score(e, ts); if (s) hits.push([s, i, e]); });
    hits.sort(function (a, b) { return b[0] - a[0] || a[1] - b[1]; });
    return hits.slice(0, 12).map(function (h) { return h[2]; });
  }

  function esc(s) { return s.replace(/[&<>"]/g, function (c) { return {'&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;'}[c]; }); }

  function snippet(text, ts) {
    var low = text.toLowerCase(), at = low.indexOf(ts[0]);
    var start = Math.max(0, at - 40), cut = text.slice(start, start + 140);
    var html = esc((start ? '…' : '') + cut + (start + 140 < text.length ? '…' : ''));
    ts.forEach(function (t) { html = html.replace(new RegExp('(' + esc(t).replace(/[.*+?^${}()|[\]\\]/g, '\\$&') + ')', 'ig'), '<mark>$1</mark>'); });
    return html;
  }

  function setup() {
    var input = document.getElementById('search-input'), list = document.getElementById('search-results');
    var toggle = document.querySelector('.nav-toggle');
    if (toggle) toggle.addEventListener('click', function () {
      var open = document.body.classList.toggle('nav-open');
      toggle.setAttribute('aria-expanded', open ? 'true' : 'false');
    });
    if (!input || !list) return;
    var selected = -1;
    function show() {
      var q = input.value.trim();
      if (!q) { list.hidden = true; list.innerHTML = ''; return; }
      loadIndex(function () {
        var ts = terms(q), hits = search(q);
        selected = hits.length ? 0 : -1;
        list.innerHTML = hits.length ? hits.map(function (e, i) {
          return '<li role="option"' + (i === 0 ? ' class="selected"' : '') + '><a href="' + esc(e.href) + '">' +
            '<span class="where">' + esc(e.title) + (e.section ? ' › ' + esc(e.section) : '') + '</span>' +
            (e.text ? '<span class="snippet">' + snippet(e.text, ts) + '</span>' : '') + '</a></li>';
        }).join('') : '<li class="none">No results for “' + esc(q) + '”</li>';
        list.hidden = false;
      });
    }
    function select(i) {
      var items = list.querySelectorAll('li[role=option]');
      if (!items.length) return;
      selected = (i + items.length) % items.length;
      items.forEach(function (li, j) { li.classList.toggle('selected', j === selected); });
      items[selected].scrollIntoView({block: 'nearest'});
    }
    input.addEventListener('focus', function () { loadIndex(function () {}); if (input.value.trim()) show(); });
    input.addEventListener('input', show);
    input.addEventListener('keydown', function (ev) {
      if (ev.key === 'ArrowDown') { ev.preventDefault(); select(selected + 1); }
      else if (ev.key === 'ArrowUp') { ev.preventDefault(); select(selected - 1); }
      else if (ev.key === 'Escape') { list.hidden = true; input.blur(); }
      else if (ev.key === 'Enter') {
        var a = list.querySelectorAll('li[role=option] a')[Math.max(selected, 0)];
        if (a) { ev.preventDefault(); done(); window.location.href = a.getAttribute('href'); }
      }
    });
    function done() { list.hidden = true; input.value = ''; input.blur(); }  // a result on this page: no reload
    list.addEventListener('click', function (ev) { if (ev.target.closest('a')) done(); });
    document.addEventListener('click', function (ev) { if (!ev.target.closest('.search')) list.hidden = true; });
    document.addEventListener('keydown', function (ev) {   // "/" or "s" focuses the search box, as on a Quarto site
      var t = ev.target.tagName;
      if ((ev.key === '/' || ev.key === 's') && !ev.ctrlKey && !ev.metaKey && !ev.altKey && t !== 'INPUT' && t !== 'TEXTAREA') {
        ev.preventDefault(); input.focus();
      }
    });
  }

  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', setup); else setup();
})();
