import http from "node:http";
import { Webhook } from "standardwebhooks";

const wh = new Webhook(process.env.PETSTORE_WEBHOOK_SECRET); // whsec_..., as webhooks add printed it

http.createServer((req, res) => {
  const chunks = [];
  req.on("data", (chunk) => chunks.push(chunk));
  req.on("end", () => {
    let event;
    try {
      // The body as sent, byte for byte: a parsed and re-encoded body fails.
      event = wh.verify(Buffer.concat(chunks).toString("utf8"), req.headers);
    } catch (err) {
      console.log(`refused ${req.headers["webhook-id"]}: ${err.message}`);
      res.writeHead(400).end();
      return;
    }
    console.log(`verified ${req.headers["webhook-id"]} ${event.type} ${JSON.stringify(event.data)}`);
    res.writeHead(204).end();
  });
}).listen(Number(process.env.PORT ?? 8080), "127.0.0.1", () => console.log("listening"));
