// The console's JavaScript: progress that moves while a run goes on, and the review queue's keys.
"use strict";

function pollMs() {
  return Number(document.body.dataset.pollMs) || 2000;
}

// Jobs shown in a table#jobs: their status and progress, polled from /api/progress.
function pollJobs() {
  const table = document.getElementById("jobs");
  if (!table) return;
  const rows = new Map();
  table.querySelectorAll("[data-job-id]").forEach((row) => rows.set(row.dataset.jobId, row));
  if (rows.size === 0) return;
  const url = table.dataset.progressUrl + "?ids=" + Array.from(rows.keys()).join(",");
  const tick = async () => {
    try {
      const answer = await fetch(url, { credentials: "same-origin" });
      if (answer.ok) {
        const body = await answer.json();
        body.jobs.forEach((job) => showJob(rows.get(String(job.id)), job));
      }
    } finally {
      setTimeout(tick, pollMs());
    }
  };
  setTimeout(tick, pollMs());
}

function showJob(row, job) {
  if (!row) return;
  const percent = Math.round(job.progress * 100);
  row.querySelector('[data-field="bar"]').value = job.progress;
  row.querySelector('[data-field="percent"]').textContent = percent + "%";
  const status = row.querySelector('[data-field="status"]');
  status.textContent = job.status;
  status.className = "status status-" + job.status;
  const pages = row.querySelector('[data-field="pages"]');
  if (pages) pages.textContent = job.pages === null ? "" : job.pages;
}

// The runs page: its figures, polled from /api/summary.
function pollSummary() {
  const box = document.getElementById("summary");
  if (!box) return;
  const tick = async () => {
    try {
      const answer = await fetch(box.dataset.summaryUrl, { credentials: "same-origin" });
      if (answer.ok) {
        const figures = await answer.json();
        box.querySelectorAll("[data-figure]").forEach((el) => { el.textContent = figures[el.dataset.figure]; });
        box.querySelector("[data-figure-progress]").value = figures.done_fraction;
        document.querySelectorAll("[data-status-count]").forEach((el) => {
          el.textContent = figures.by_status[el.dataset.statusCount];
        });
      }
    } finally {
      setTimeout(tick, pollMs());
    }
  };
  setTimeout(tick, pollMs());
}

// The review queue: one key per action; every action submits its (CSRF-carrying) form.
function reviewKeys() {
  const review = document.getElementById("review");
  if (!review) return;
  const pages = Array.from(review.querySelectorAll("#pages figure"));
  const splitPage = document.querySelector('#split input[name="page"]');
  const choose = (figure) => {
    pages.forEach((f) => f.classList.toggle("chosen", f === figure));
    if (splitPage) splitPage.value = figure.dataset.page;
    figure.scrollIntoView({ block: "nearest" });
  };
  pages.forEach((figure) => figure.addEventListener("click", () => choose(figure)));
  const step = (by) => {
    const at = pages.findIndex((f) => f.classList.contains("chosen"));
    const next = pages[Math.min(pages.length - 1, Math.max(0, at + by))];
    if (next) choose(next);
  };
  const submit = (id) => {
    const form = document.getElementById(id);
    if (form) form.requestSubmit();
  };
  const follow = (id) => {
    const link = document.getElementById(id);
    if (link) window.location.assign(link.href);
  };
  const actions = {
    a: () => submit("accept"),
    s: () => submit("split"),
    m: () => submit("merge"),
    c: () => document.querySelector('#class select')?.focus(),
    e: () => document.querySelector("#field select")?.focus(),
    j: () => follow("next"),
    k: () => follow("previous"),
    ArrowRight: () => step(1),
    ArrowLeft: () => step(-1),
  };
  document.addEventListener("keydown", (event) => {
    const typing = event.target.closest("input, select, textarea");
    if (typing || event.ctrlKey || event.metaKey || event.altKey) return;
    const action = actions[event.key];
    if (action) {
      event.preventDefault();
      action();
    }
  });
  // Enter in the class list sends it (in the field list, Tab goes on to the value, Enter there sends
  // it); Escape leaves either without sending.
  document.querySelector("#class select")?.addEventListener("keydown", (event) => {
    if (event.key === "Enter") { event.preventDefault(); submit("class"); }
  });
  document.querySelectorAll("#class select, #field input, #field select").forEach((el) => {
    el.addEventListener("keydown", (event) => { if (event.key === "Escape") el.blur(); });
  });
}

document.addEventListener("DOMContentLoaded", () => {
  pollJobs();
  pollSummary();
  reviewKeys();
});
