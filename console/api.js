// The console's one way to the admin API: the token from this tab's
// sessionStorage as the bearer header, JSON in and out, and errors that say
// what happened. The token is never put in a URL, a cookie or localStorage.

const tokenKey = 'petstore.adminToken';

export const token = {
  get: () => sessionStorage.getItem(tokenKey),
  set: (t) => sessionStorage.setItem(tokenKey, t),
  forget: () => sessionStorage.removeItem(tokenKey),
};

export class ApiError extends Error {
  constructor(status, code, message, retryAfter) {
    super(message);
    this.status = status;
    this.code = code;
    this.retryAfter = retryAfter;
  }

  // explain is the error in words for the person at the console.
  explain() {
    if (this.status === 429) {
      // The admin API limits only failed authentications, per address.
      return `Too many failed sign-ins from this address: try again in ${this.retryAfter || 'a few'} seconds. ` +
        'Through an SSH tunnel every operator is 127.0.0.1 and shares this one allowance.';
    }
    if (this.status === 403) {
      return `This token may not do that: ${this.message} Ask whoever runs petstore admin create for a token with that scope.`;
    }
    return this.message;
  }
}

// attempt runs a request of the console's; an error of the API is said
// through say, in words (a refused token has already brought back the
// sign-in, with its reason).
export async function attempt(run, say) {
  try {
    await run();
  } catch (e) {
    if (!(e instanceof ApiError)) {
      throw e;
    }
    if (e.status !== 401) {
      say(e.explain());
    }
  }
}

let signedOut = () => {};

// whenSignedOut sets what happens when the server refuses the token: the
// console forgets it and shows the sign-in with the reason.
export function whenSignedOut(f) {
  signedOut = f;
}

// api sends one request to /admin/v1 + path. It answers {data, next}: the
// decoded body and the path of the next page, if any.
export async function api(method, path, body) {
  const headers = { Accept: 'application/json', Authorization: 'Bearer ' + (token.get() || '') };
  const init = { method, headers, cache: 'no-store', credentials: 'omit', redirect: 'error', referrerPolicy: 'no-referrer' };
  if (body !== undefined) {
    headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  let res;
  try {
    res = await fetch('/admin/v1' + path, init);
  } catch (e) {
    throw new ApiError(0, 'unreachable', 'The server did not answer: is it running, and is the tunnel up?');
  }
  const text = await res.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch (e) {
    data = null;
  }
  if (!res.ok) {
    const message = (data && data.message) || `HTTP ${res.status}`;
    const err = new ApiError(res.status, data && data.code, message, res.headers.get('Retry-After'));
    if (res.status === 401) {
      token.forget();
      signedOut(message);
    }
    throw err;
  }
  return { data, next: nextPage(res.headers.get('Link')) };
}

// nextPage is the path, under /admin/v1, of a Link rel="next", or null.
function nextPage(link) {
  const m = /<([^>]*)>;\s*rel="next"/.exec(link || '');
  if (!m || !m[1].startsWith('/admin/v1/')) {
    return null;
  }
  return m[1].slice('/admin/v1'.length);
}

// query is a query string of the parameters with a value.
export function query(params) {
  const q = new URLSearchParams();
  for (const [name, value] of Object.entries(params)) {
    if (value !== '' && value != null) {
      q.set(name, String(value));
    }
  }
  const s = q.toString();
  return s ? '?' + s : '';
}
