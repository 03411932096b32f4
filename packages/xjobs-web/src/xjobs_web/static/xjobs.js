// xjobs dashboard: the live refresh. Every [data-live] region is re-read from the same URL every
// data-refresh seconds (0: never) while its page is visible and the "live" box, if any, is ticked.
(function () {
  "use strict";
  var seconds = parseInt(document.body.getAttribute("data-refresh") || "0", 10);
  if (!seconds || !document.querySelector("[data-live]")) return;
  function wanted() {
    var toggle = document.querySelector("[data-live-toggle]");
    return !document.hidden && (!toggle || toggle.checked);
  }
  function refresh() {
    if (!wanted()) return;
    fetch(window.location.href, { credentials: "same-origin", headers: { "X-Xjobs-Live": "1" } })
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (text) {
        if (!text) return;
        var fresh = new DOMParser().parseFromString(text, "text/html").querySelectorAll("[data-live]");
        var current = document.querySelectorAll("[data-live]");
        for (var i = 0; i < current.length && i < fresh.length; i++) {
          current[i].innerHTML = fresh[i].innerHTML;
        }
        document.body.setAttribute("data-refreshed", String(Date.now()));
      })
      .catch(function () { /* the next tick tries again */ });
  }
  window.setInterval(refresh, seconds * 1000);
})();
