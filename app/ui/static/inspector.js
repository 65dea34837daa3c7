// contextgate inspector: small progressive enhancements; every page works without this file.
"use strict";

function setupFilter() {
  const input = document.getElementById("conversation-filter");
  if (!input) return;
  const rows = Array.from(document.querySelectorAll("#conversations tr.conversation-row"));
  input.addEventListener("input", () => {
    const needle = input.value.trim().toLowerCase();
    for (const row of rows) {
      row.hidden = needle !== "" && !row.textContent.toLowerCase().includes(needle);
    }
  });
}

function setupExpand() {
  for (const text of document.querySelectorAll(".text.clamp")) {
    text.addEventListener("click", () => text.classList.toggle("open"));
  }
  const toggle = document.getElementById("toggle-all");
  const timeline = document.querySelector("ol.timeline");
  if (!toggle || !timeline) return;
  toggle.addEventListener("click", () => {
    const expanded = timeline.classList.toggle("expanded");
    toggle.textContent = expanded ? "collapse all" : "expand all";
  });
}

function markBars() {
  // Tell the page (and its tests) how many request bars were drawn.
  document.body.dataset.requestBars = String(document.querySelectorAll("li.request .bar").length);
}

document.addEventListener("DOMContentLoaded", () => {
  setupFilter();
  setupExpand();
  markBars();
  document.body.dataset.inspectorReady = "true";
});
