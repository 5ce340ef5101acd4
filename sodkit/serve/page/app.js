// The page of `sodkit serve`: each chosen or dropped photo is sent to POST /predict once
// (save=mask,cutout: one forward pass), and its mask and cut-out are shown beside it with
// links to download them. Nothing leaves for another server; nothing is stored.
"use strict";

const AT_ONCE = 2; // photos in flight at a time (the server batches what arrives together)
const queue = [];
let running = 0;
let token = sessionStorage.getItem("sodkit-token") || "";

function headers(extra) {
  const h = Object.assign({}, extra);
  if (token) h.Authorization = "Bearer " + token;
  return h;
}

function stem(name) {
  const dot = name.lastIndexOf(".");
  return dot > 0 ? name.slice(0, dot) : name;
}

function pngBlob(base64) {
  const bytes = Uint8Array.from(atob(base64), (c) => c.charCodeAt(0));
  return new Blob([bytes], { type: "image/png" });
}

function show(card, state, text) {
  card.dataset.state = state;
  card.querySelector(".status").textContent = text;
}

async function predict(file, card) {
  show(card, "running", "predicting...");
  const response = await fetch("predict?save=mask,cutout", {
    method: "POST",
    headers: headers({ "Content-Type": file.type || "application/octet-stream" }),
    body: file,
  });
  const answer = await response.json().catch(() => ({ error: response.statusText }));
  if (response.status === 401) {
    document.getElementById("token-form").hidden = false;
  }
  if (!response.ok) {
    show(card, "error", `${response.status}: ${answer.error || "failed"}`);
    return;
  }
  const base = stem(file.name);
  for (const kind of ["mask", "cutout"]) {
    const url = URL.createObjectURL(pngBlob(answer.outputs[kind]));
    card.querySelector("img." + kind).src = url;
    const link = card.querySelector(`a.${kind}-link`);
    link.href = url;
    link.download = `${base}.${kind}.png`;
  }
  show(card, "done", `${answer.width} x ${answer.height}`);
}

function pump() {
  while (running < AT_ONCE && queue.length) {
    const [file, card] = queue.shift();
    running += 1;
    predict(file, card)
      .catch((err) => show(card, "error", String(err)))
      .finally(() => { running -= 1; pump(); });
  }
}

function add(files) {
  const results = document.getElementById("results");
  const template = document.getElementById("result");
  for (const file of files) {
    const card = template.content.firstElementChild.cloneNode(true);
    card.querySelector(".name").textContent = file.name;
    card.querySelector("img.photo").src = URL.createObjectURL(file);
    results.prepend(card);
    queue.push([file, card]);
  }
  pump();
}

async function describe() {
  const health = await (await fetch("health")).json();
  if (health.token && !token) { // asked first, so that the page makes no refused request
    document.getElementById("token-form").hidden = false;
    return;
  }
  const response = await fetch("info", { headers: headers() });
  if (!response.ok) return;
  const info = await response.json();
  const licence = info.model.licence ? `, licence ${info.model.licence}` : "";
  document.getElementById("model").textContent =
    `${info.model.name} (${info.runtime.device}, input ${info.model.input_size} px${licence})`;
}

document.addEventListener("DOMContentLoaded", () => {
  const input = document.getElementById("files");
  const drop = document.getElementById("drop");
  input.addEventListener("change", () => { add(input.files); input.value = ""; });
  drop.addEventListener("dragover", (e) => { e.preventDefault(); drop.classList.add("over"); });
  drop.addEventListener("dragleave", () => drop.classList.remove("over"));
  drop.addEventListener("drop", (e) => {
    e.preventDefault();
    drop.classList.remove("over");
    add([...e.dataTransfer.files].filter((f) => f.type.startsWith("image/") || !f.type));
  });
  document.getElementById("token-form").addEventListener("submit", (e) => {
    e.preventDefault();
    token = document.getElementById("token").value;
    sessionStorage.setItem("sodkit-token", token);
    document.getElementById("token-form").hidden = true;
    describe();
  });
  describe();
});
