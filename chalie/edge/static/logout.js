// The header's "Log out" button, on every page that has one: ends this browser's session
// (POST /auth/logout, which also clears the HttpOnly cookie), then opens the login page.
const button = document.getElementById("logout");
if (button) {
  button.addEventListener("click", async () => {
    button.disabled = true;
    try {
      await fetch("/auth/logout", { method: "POST", credentials: "same-origin" });
    } finally {
      window.location.assign("/login");
    }
  });
}
