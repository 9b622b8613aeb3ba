// A card in the chat: an interface tool's result, rendered by the server as a document of its
// own (/cards/main/<seq>) and shown in a sandboxed iframe. The sandbox allows no script (the
// card's own policy says `script-src 'none'` too) but keeps the card same-origin, so this page
// can measure the card's document once it has loaded and size the frame to it. The card's
// heading is its title: the frame's accessible name carries it, with no caption repeating it.

import { el } from "./chat-escalation.js";

function fitToContent(frame) {
  let doc = null;
  try { doc = frame.contentDocument; } catch { doc = null; }
  if (!doc || !doc.documentElement) return;
  const content = Math.ceil(doc.documentElement.getBoundingClientRect().height);
  if (!content) return;
  const borders = frame.offsetHeight - frame.clientHeight;
  const height = `${content + borders}px`;
  if (frame.style.height !== height) frame.style.height = height;
}

export function createCard(frame) {
  const figure = el("figure", "card-frame");
  const title = frame.title || frame.tool_name || "Card";
  const frameEl = el("iframe", "card");
  frameEl.setAttribute("sandbox", "allow-same-origin allow-popups allow-popups-to-escape-sandbox");
  frameEl.title = title;
  frameEl.src = `/cards/main/${Number(frame.seq)}`;
  frameEl.addEventListener("load", () => {
    fitToContent(frameEl);
    frameEl.dataset.fitted = "true";
  });
  // A narrower frame wraps the card's text onto more lines: measure again.
  let width = 0;
  new ResizeObserver(() => {
    if (frameEl.clientWidth === width) return;
    width = frameEl.clientWidth;
    fitToContent(frameEl);
  }).observe(frameEl);
  figure.append(frameEl);
  if (typeof frame.open_url === "string" && /^https?:\/\//i.test(frame.open_url)) {
    const caption = el("figcaption", "card-links");
    const link = el("a", "card-open", "Open");
    link.href = frame.open_url;
    link.rel = "noopener noreferrer";
    link.target = "_blank";
    link.setAttribute("aria-label", `Open ${title}`);
    caption.append(link);
    figure.append(caption);
  }
  return figure;
}
