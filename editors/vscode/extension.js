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
        // Shape checks run the workspace's model constructors: none until it is trusted.
        trusted: vscode.workspace.isTrusted,
      },
    },
  );
  context.subscriptions.push(client);
  // Granting trust later restarts the server so that shape checks start.
  context.subscriptions.push(
    vscode.workspace.onDidGrantWorkspaceTrust(async () => {
      if (client) {
        client.clientOptions.initializationOptions.trusted = true;
        await client.restart();
      }
    }),
  );
  await client.start();
}

function deactivate() {
  return client ? client.stop() : undefined;
}

module.exports = { activate, deactivate };
