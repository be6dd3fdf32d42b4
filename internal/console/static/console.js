// Live updates without a reload: every data-refresh milliseconds the page
// fetches itself and swaps in its <main>, unless the operator is typing in
// it. No framework, no CDN: the console works offline.
(function () {
  "use strict";
  var every = parseInt(document.body.getAttribute("data-refresh"), 10);
  if (!every) { return; }
  var busy = false;
  function tick() {
    var main = document.getElementById("live");
    var active = document.activeElement;
    if (busy || (active && main.contains(active) && active.tagName !== "A" && active.tagName !== "BUTTON")) {
      return schedule();
    }
    busy = true;
    fetch(location.href, { credentials: "same-origin", headers: { "Accept": "text/html" } })
      .then(function (r) { return r.ok ? r.text() : Promise.reject(r.status); })
      .then(function (html) {
        var doc = new DOMParser().parseFromString(html, "text/html");
        var fresh = doc.getElementById("live");
        if (fresh) { main.replaceChildren.apply(main, Array.prototype.slice.call(fresh.childNodes)); }
        document.getElementById("live-indicator").textContent = "live";
        every = parseInt(doc.body.getAttribute("data-refresh"), 10);
      })
      .catch(function () { document.getElementById("live-indicator").textContent = "offline"; })
      .then(function () { busy = false; if (every) { schedule(); } });
  }
  function schedule() { setTimeout(tick, every); }
  schedule();
})();
