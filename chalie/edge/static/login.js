// The login page: posts the password to /auth/login as JSON and, once logged in, goes to the
// page the person asked for (`next`, only a path on this server) or to the chat.

const form = document.getElementById("login-form");
const password = document.getElementById("password");
const button = document.getElementById("login");
const errorLine = document.getElementById("login-error");

/** `next` from the query string when it is a path on this origin, else "/". */
function nextPath() {
  const next = new URLSearchParams(location.search).get("next");
  if (!next || !next.startsWith("/") || next.startsWith("//") || next.startsWith("/\\")) return "/";
  return next;
}

async function errorMessage(response) {
  if (response.status === 401) return "Wrong password.";
  if (response.status === 429) {
    const wait = parseInt(response.headers.get("Retry-After") || "", 10);
    return `Too many wrong passwords; try again in ${Number.isFinite(wait) ? wait : "a few"} seconds.`;
  }
  try {
    const body = await response.json();
    if (body && body.error) return String(body.error);
  } catch { /* not JSON */ }
  return `The server answered HTTP ${response.status}.`;
}

async function logIn(event) {
  event.preventDefault();
  errorLine.textContent = "";
  if (!password.value) {
    errorLine.textContent = "Enter the password.";
    password.focus();
    return;
  }
  button.disabled = true;
  try {
    const response = await fetch("/auth/login", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ password: password.value }),
      credentials: "same-origin",
    });
    if (response.ok) {
      try { sessionStorage.setItem("chalie.just-logged-in", "1"); } catch { /* no storage */ }
      location.assign(nextPath());
      return;
    }
    errorLine.textContent = await errorMessage(response);
    password.select();
    password.focus();
  } catch {
    errorLine.textContent = "Could not reach the server. Is it running?";
  } finally {
    button.disabled = false;
  }
}

// Already logged in (an old tab, the back button): go straight on.
async function skipWhenLoggedIn() {
  try {
    const response = await fetch("/auth/session", { cache: "no-store", credentials: "same-origin" });
    if (response.ok) location.replace(nextPath());
  } catch { /* the form still works once the server is back */ }
}

form.addEventListener("submit", logIn);
password.focus();
skipWhenLoggedIn();
