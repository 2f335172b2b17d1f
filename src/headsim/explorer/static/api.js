// The explorer's JSON API (/api/..., see /docs): requests and their errors as {error, fix, status}.

/** ``method`` ``url`` with JSON ``body``: the reply's JSON, or throws {error, fix, status}. */
export async function api(method, url, body) {
  let res;
  try {
    res = await fetch(url, {
      method,
      headers: body ? { 'Content-Type': 'application/json' } : {},
      body: body ? JSON.stringify(body) : undefined,
    });
  } catch (e) {
    throw { error: 'the server is not reachable', fix: 'is `headsim serve` still running? Restart it and reload the page.' };
  }
  let data = null;
  try { data = await res.json(); } catch (e) { /* not JSON */ }
  if (!res.ok) throw (data && data.error) ? { ...data, status: res.status } : { error: `HTTP ${res.status}`, fix: '', status: res.status };
  return data;
}

/** POST ``body`` (naming analysis ``a`` by id) to ``url``; when the analysis has left the server's cache
 * (404), send its ``text`` instead. */
export async function postForAnalysis(url, body, a, text) {
  try {
    return await api('POST', url, body);
  } catch (err) {
    if (err.status !== 404) throw err;
    return api('POST', url, { ...body, id: undefined, text, seq_len: a.seq_len });
  }
}
