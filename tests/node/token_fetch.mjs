// A fetch for TanStack AI's connection adapters (their `fetchClient` option) that keeps a
// chat going across token expiry: the README's pattern, as the tests run it.
//
// `getToken()` asks the app's backend for a fresh token (it mints one with POST /v1/tokens).
// Every request goes out with the newest token: a reconnect re-sends the headers of the
// request it resumes, and those may carry a token that has expired since. A request refused
// with 401 `token_expired` gets a fresh token and is sent once more; the adapter then goes
// on from its Last-Event-ID as if the connection had only dropped.
export function tokenFetch(getToken, fetchImpl = globalThis.fetch) {
  let current = null;
  let renewing = null;
  const renew = (stale) => {
    if (current !== stale) return Promise.resolve();  // another request renewed it already
    renewing ??= getToken().then((token) => { current = token; }).finally(() => { renewing = null; });
    return renewing;
  };
  const fetchWithToken = async (input, init = {}) => {
    if (current === null) await renew(null);
    for (let retried = false; ; retried = true) {
      const sent = current;
      const headers = new Headers(init.headers);
      headers.set("Authorization", `Bearer ${sent}`);
      const response = await fetchImpl(input, { ...init, headers });
      if (response.status !== 401 || retried) return response;
      const body = await response.clone().json().catch(() => null);
      if (body?.error?.code !== "token_expired") return response;
      await renew(sent);
    }
  };
  fetchWithToken.token = async () => { if (current === null) await renew(null); return current; };
  return fetchWithToken;
}
