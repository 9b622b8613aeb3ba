// The chat page's composer: the message box (Enter sends, Shift+Enter breaks the line, grows
// with its text) and image attachments (at most 3, uploaded at once to POST /api/images,
// previewed from blob: URLs, removable) whose ids go with the next chat.

const MAX_IMAGES = 3;
const ACCEPTED = ["image/png", "image/jpeg", "image/webp", "image/gif"];
const MAX_INPUT_HEIGHT_PX = 200;

async function uploadImage(file) {
  const response = await fetch("/api/images", {
    method: "POST", body: file, headers: { "Content-Type": file.type }, credentials: "same-origin",
  });
  let body = null;
  try { body = await response.json(); } catch { /* not JSON */ }
  if (response.status === 401) throw new Error("You are logged out: log in again to attach images.");
  if (!response.ok || !body || !body.image_id) {
    throw new Error((body && body.error) || `The upload failed (HTTP ${response.status}).`);
  }
  return body.image_id;
}

/**
 * elements: {form, input, attach, attachments, attachError}; onSubmit() is called for Enter
 * and the Send button.
 */
export function createComposer({ form, input, attach, attachments, attachError, onSubmit }) {
  const items = []; // {file, url, li, upload: Promise<string>, id}

  function fitInputHeight() {
    input.style.height = "auto";
    input.style.height = `${Math.min(input.scrollHeight + 2, MAX_INPUT_HEIGHT_PX)}px`;
  }

  function showAttachError(text) { attachError.textContent = text; }

  function removeItem(item, { keepFocus = true } = {}) {
    const index = items.indexOf(item);
    if (index < 0) return;
    items.splice(index, 1);
    URL.revokeObjectURL(item.url);
    item.li.remove();
    if (keepFocus) (attachments.querySelector("button.remove") || input).focus();
  }

  function addFile(file) {
    const url = URL.createObjectURL(file);
    const li = document.createElement("li");
    li.dataset.state = "uploading";
    const img = document.createElement("img");
    img.src = url;
    img.alt = file.name;
    const status = document.createElement("span");
    status.className = "upload-state";
    status.textContent = "Uploading…";
    const remove = document.createElement("button");
    remove.type = "button";
    remove.className = "remove";
    remove.textContent = "×";
    remove.setAttribute("aria-label", `Remove ${file.name}`);
    li.append(img, status, remove);
    attachments.append(li);
    const item = { file, url, li, id: null, upload: null };
    item.upload = uploadImage(file).then((id) => {
      item.id = id;
      li.dataset.state = "ready";
      status.textContent = "";
      return id;
    }, (error) => {
      showAttachError(`${file.name}: ${error.message}`);
      removeItem(item, { keepFocus: false });
      return null;
    });
    remove.addEventListener("click", () => { showAttachError(""); removeItem(item); });
    items.push(item);
  }

  attach.addEventListener("change", () => {
    showAttachError("");
    const files = Array.from(attach.files || []);
    attach.value = "";
    const refused = [];
    for (const file of files) {
      if (!ACCEPTED.includes(file.type)) { refused.push(`${file.name} is not a PNG, JPEG, WebP or GIF image`); continue; }
      if (items.length >= MAX_IMAGES) { refused.push(`${file.name} was not added: at most ${MAX_IMAGES} images a message`); continue; }
      addFile(file);
    }
    if (refused.length) showAttachError(refused.join(". ") + ".");
  });

  input.addEventListener("keydown", (event) => {
    if (event.key !== "Enter" || event.shiftKey || event.isComposing || event.keyCode === 229) return;
    event.preventDefault();
    onSubmit();
  });
  input.addEventListener("input", fitInputHeight);
  form.addEventListener("submit", (event) => { event.preventDefault(); onSubmit(); });

  return {
    hasImages: () => items.length > 0,
    /**
     * The ids of the images attached now, once their uploads finish (failed ones are dropped),
     * and release() to take those images out of the composer once they are sent.
     */
    async takeImages() {
      const taken = items.slice();
      const ids = await Promise.all(taken.map((item) => item.upload));
      return {
        ids: ids.filter(Boolean),
        release() {
          for (const item of taken) removeItem(item, { keepFocus: false });
          showAttachError("");
        },
      };
    },
    clearText() {
      input.value = "";
      fitInputHeight();
    },
    showAttachError,
  };
}
