// Points of a figure one click from their rows: a chapter writes an image map beside the
// figure (longctx.plots.image_map, in the saved PNG's pixels); this gives the figure's image
// that map and keeps the areas on their points at whatever width the image is shown.
(function () {
  "use strict";
  function attach(map) {
    const figure = document.getElementById(map.dataset.figure);
    const img = figure && figure.querySelector("img");
    if (!img) return;
    img.useMap = "#" + map.name;
    const natural = Number(map.dataset.width);
    const areas = Array.from(map.areas).map(a => ({ area: a, at: a.coords.split(",").map(Number) }));
    function fit() {
      if (!img.clientWidth || !natural) return;
      const k = img.clientWidth / natural;
      areas.forEach(({ area, at }) => {
        area.coords = at.map((v, i) => (i < 2 ? Math.round(v * k) : Math.max(6, Math.round(v * k)))).join(",");
      });
    }
    if (img.complete) fit(); else img.addEventListener("load", fit);
    window.addEventListener("resize", fit);
  }
  // On a narrow screen a figure is shrunk below reading size: a tap on it (outside a linked
  // point) opens it at its own size in an overlay that scrolls; a tap on the overlay closes it.
  function zoomable(img) {
    img.style.cursor = "zoom-in";
    img.addEventListener("click", () => {
      if (img.naturalWidth <= img.clientWidth) return;
      const overlay = document.createElement("div");
      overlay.className = "figure-zoom";
      overlay.setAttribute("role", "dialog");
      overlay.setAttribute("aria-label", (img.alt || "figure") + " (tap to close)");
      const big = img.cloneNode();
      big.removeAttribute("usemap");
      big.style.width = img.naturalWidth + "px";
      big.style.maxWidth = "none";
      overlay.appendChild(big);
      overlay.addEventListener("click", () => overlay.remove());
      document.body.appendChild(overlay);
    });
  }
  function run() {
    document.querySelectorAll("map[data-figure]").forEach(attach);
    document.querySelectorAll("figure img").forEach(zoomable);
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", run);
  else run();
})();
