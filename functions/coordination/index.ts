/** Fleet coordination (docs/coordination.md): one module per route family. */
import './chats';
import './emailCursor';
import './interactions';
import './promises';
