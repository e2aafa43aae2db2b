// The mqb VS Code extension: the TextMate grammar and language
// configuration are contributed by package.json; this file starts
// `mqbc lsp` (diagnostics, hover with the route's verdict) as a language
// server over stdio. No build step: VS Code loads it as is.
'use strict';

const vscode = require('vscode');
const { LanguageClient, TransportKind } = require('vscode-languageclient/node');

let client;

function serverOptions() {
  const cfg = vscode.workspace.getConfiguration('mqb');
  const command = cfg.get('server.path', 'mqbc');
  const args = ['lsp', ...cfg.get('server.args', [])];
  return { command, args, transport: TransportKind.stdio };
}

async function start(context) {
  client = new LanguageClient(
    'mqb',
    'mqb language server',
    serverOptions(),
    {
      documentSelector: [{ scheme: 'file', language: 'mqb' }, { scheme: 'untitled', language: 'mqb' }],
      synchronize: { fileEvents: vscode.workspace.createFileSystemWatcher('**/*.mqb') },
    },
  );
  try {
    await client.start();
  } catch (err) {
    vscode.window.showErrorMessage(`mqb: could not start "${serverOptions().command} lsp": ${err.message}. Set mqb.server.path to the mqbc binary.`);
  }
  context.subscriptions.push({ dispose: () => client && client.stop() });
}

async function activate(context) {
  context.subscriptions.push(
    vscode.commands.registerCommand('mqb.restartServer', async () => {
      if (client) await client.stop();
      await start(context);
    }),
  );
  await start(context);
}

async function deactivate() {
  if (client) await client.stop();
}

module.exports = { activate, deactivate };
