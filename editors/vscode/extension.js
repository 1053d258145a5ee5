// torchlint for VS Code: starts `torchlint server` for Python files.
// Everything (diagnostics, quick fixes, fix-all, hover docs) comes from the server.
"use strict";

const vscode = require("vscode");
const { LanguageClient } = require("vscode-languageclient/node");

let client;

async function activate(context) {
  const config = vscode.workspace.getConfiguration("torchlint");
  const [command, ...args] = config.get("path", ["torchlint", "server"]);
  client = new LanguageClient(
    "torchlint",
    "torchlint",
    { command, args },
    {
      documentSelector: [
        { scheme: "file", language: "python" },
        { scheme: "untitled", language: "python" },
      ],
      initializationOptions: {
        debounceMs: config.get("debounceMs", 30),
        shapes: config.get("shapes", true),
      },
    },
  );
  context.subscriptions.push(client);
  await client.start();
}

function deactivate() {
  return client ? client.stop() : undefined;
}

module.exports = { activate, deactivate };
