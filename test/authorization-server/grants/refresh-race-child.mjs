// One client process of the refresh-race test: reads {base, clientId, refreshToken} as one JSON
// line on stdin (never argv, which other processes can read), refreshes once with plain fetch, as a
// second window or terminal of a client would, and prints the status and the new tokens as JSON.
let input = "";
process.stdin.setEncoding("utf8");
process.stdin.on("data", (chunk) => {
  input += chunk;
});
process.stdin.on("end", async () => {
  const { base, clientId, refreshToken } = JSON.parse(input);
  const response = await fetch(`${base}/token`, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded", accept: "application/json" },
    body: new URLSearchParams({
      grant_type: "refresh_token",
      refresh_token: refreshToken,
      client_id: clientId,
    }).toString(),
  });
  const body = await response.json();
  process.stdout.write(
    JSON.stringify({
      status: response.status,
      error: body.error,
      refresh_token: body.refresh_token,
      access_token: body.access_token,
    }),
  );
});
