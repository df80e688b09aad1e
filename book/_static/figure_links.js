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
  function run() { document.querySelectorAll("map[data-figure]").forEach(attach); }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", run);
  else run();
})();
