// The pages' one way to call the Chalie server's REST API: JSON in, JSON out. A 401 sends
// the person to the login page (and back to this page after); any other failure throws an ApiError
// carrying the server's own `error` message, for the section to show.

export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.name = 'ApiError';
    this.status = status;
  }
}

/** Call `path` on the Chalie server; the decoded JSON body, or null for an empty answer. */
export async function callApi(path, { method = 'GET', body } = {}) {
  const init = { method, credentials: 'same-origin', headers: { Accept: 'application/json' } };
  if (body !== undefined) {
    init.headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  let response;
  try {
    response = await fetch(path, init);
  } catch {
    throw new ApiError(0, 'Chalie cannot be reached right now; check the connection and try again.');
  }
  if (response.status === 401) {
    location.assign(`/login?next=${encodeURIComponent(location.pathname)}`);
    throw new ApiError(401, 'Not logged in.');
  }
  const data = await readJson(response);
  if (!response.ok) {
    const message = data && typeof data.error === 'string' && data.error
      ? data.error
      : `The server answered ${response.status}.`;
    throw new ApiError(response.status, message);
  }
  return data;
}

async function readJson(response) {
  if (response.status === 204) return null;
  const text = await response.text();
  if (!text) return null;
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}

/** A query string from an object, leaving out null and undefined values. */
export function withQuery(path, params) {
  const query = new URLSearchParams();
  for (const [name, value] of Object.entries(params)) {
    if (value !== null && value !== undefined) query.set(name, String(value));
  }
  const text = query.toString();
  return text ? `${path}?${text}` : path;
}
