// The openai 4.x module, required from here so that it resolves to this package's own dependency.
module.exports = () => require('openai');
